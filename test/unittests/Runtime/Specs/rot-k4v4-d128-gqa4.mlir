// 4-bit keys per token (span = channels) and 4-bit values per channel
// (span = tokens), both Hadamard-rotated, on a 2-layer test model:
// heads = 8, kv_heads = 2, head_dim = 128, 4 sink tokens. The keys'
// rotation has no seed, the values' has random signs (rotate_seed).
// Runtime end-to-end tests.
kvq.cache @rot_k4v4_d128_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 4, recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
  }
  kvq.values window <sink = 4, recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1234567>
  }
}
