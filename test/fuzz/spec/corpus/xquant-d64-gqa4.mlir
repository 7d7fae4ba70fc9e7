// XQuant-style cross-layer sharing (specs/xquant-*.mlir) on a 2-layer test
// model: heads = 8, kv_heads = 2, head_dim = 64. Layer 1 reuses layer 0's
// codes for keys (span = tokens) and values (span = channels) and stores
// only its own eta-calibrated scales and zero-points. Runtime tests.
kvq.cache @xquant_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> share <from = 0> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 0> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}
