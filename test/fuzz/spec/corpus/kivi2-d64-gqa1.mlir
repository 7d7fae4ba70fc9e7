// KIVI-2 (specs/kivi-2bit.mlir) on a 2-layer test model: heads = 2,
// kv_heads = 2, head_dim = 64. Runtime end-to-end tests.
kvq.cache @kivi2_d64_gqa1 model <layers = 2, heads = 2, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
