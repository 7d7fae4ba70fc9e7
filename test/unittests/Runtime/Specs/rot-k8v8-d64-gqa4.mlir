// 8-bit Hadamard-rotated keys per channel (span = tokens) and values per
// token (span = channels) on a 2-layer test model: heads = 8, kv_heads = 2,
// head_dim = 64, no sink tokens; random signs of different seeds on both
// (two sign tables in one attend kernel). Runtime end-to-end tests.
kvq.cache @rot_k8v8_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 8, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 3>
  }
  kvq.values window <recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 8, mode = asym, span = channels, group = 64, rotate = hadamard, rotate_seed = 5>
  }
}
