// Variant for kvq-eval: a kvq scheme at llama.cpp q4_0's 4.5 bits an
// element (docs/Evaluation.md, "Hadamard rotation"): every token quantized
// at once, rotated by a Hadamard matrix with random signs (seed 1), 4-bit
// asym codes in groups of 32 channels of one token with f8 (E4M3) scale and
// zero (4 + 16/32 bits).
kvq.cache @kvq_4bit_asym_f8_rotated model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, params = f8E4M3FN, rotate = hadamard, rotate_seed = 1>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, params = f8E4M3FN, rotate = hadamard, rotate_seed = 1>
  }
}
