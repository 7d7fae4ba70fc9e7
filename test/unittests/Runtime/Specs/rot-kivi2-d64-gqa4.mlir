// KIVI-2 (specs/kivi-2bit.mlir) with Hadamard-rotated keys and values on a
// 2-layer test model: heads = 8, kv_heads = 2, head_dim = 64, 4 sink
// tokens. The keys' rotation has random signs (rotate_seed), the values'
// has none. Runtime end-to-end tests.
kvq.cache @rot_kivi2_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 4, recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 7>
  }
  kvq.values window <sink = 4, recent = 129, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard>
  }
}
