// SKVQ K2V2 (specs/skvq-k2v2-g128.mlir) on a 2-layer test model: heads = 8,
// kv_heads = 2, head_dim = 128: f8E4M3FN scale and zero-point, clipping
// 0.92, 5 sink tokens, window 128. Runtime end-to-end tests.
kvq.cache @skvq_d128_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, clip = 0.92>
  }
}
