// InnerQ-Base (specs/innerq-base.mlir) on a 2-layer test model: heads = 2,
// kv_heads = 2, head_dim = 128. Runtime end-to-end tests.
kvq.cache @innerq_base_d128_gqa1 model <layers = 2, heads = 2, kv_heads = 2, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
