// 3-bit Hadamard-rotated keys per token (span = channels, sym) and values
// per channel (span = tokens, asym) on a 2-layer test model: heads = 8,
// kv_heads = 2, head_dim = 64, 4 sink tokens; random signs on the keys.
// The GPU scores and sums them with the 3-bit field forms of the matrix
// unit. Runtime end-to-end tests.
kvq.cache @rot_k3v3_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 4, recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 99>
  }
  kvq.values window <sink = 4, recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32, rotate = hadamard>
  }
}
