// Variant for kvq-eval: llama.cpp's q5_0 cache type as a kvq scheme, for the
// side-by-side in docs/Evaluation.md ("Hadamard rotation"): every token's
// keys and values quantized at once (no full-precision window), in groups
// of 32 channels of one token, 5-bit sym codes with f16 parameters (5.5 bits
// an element, as llama.cpp counts q5_0), rotated first by a Hadamard
// matrix with random signs (seed 1); llama.cpp rotates its quantized caches
// by a Hadamard matrix by default.
kvq.cache @llamacpp_q5_0_rotated model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 5, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 5, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
  }
}
