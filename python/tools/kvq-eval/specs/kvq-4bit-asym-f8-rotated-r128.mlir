// Variant for kvq-eval and kvq-hf-compare: kvq-4bit-asym-f8-rotated.mlir
// with transformers' QuantizedCache residual as a window: the 128 most
// recent keys and values kept in full precision, each older token quantized
// (rotated by a Hadamard matrix with random signs, seed 1; 4-bit asym codes
// in groups of 32 channels of one token, f8 (E4M3) scale and zero) when it
// leaves the window (docs/Evaluation.md, "transformers' quantized caches,
// side by side").
kvq.cache @kvq_4bit_asym_f8_rotated_r128 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, params = f8E4M3FN, rotate = hadamard, rotate_seed = 1>
  }
  kvq.values window <recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, params = f8E4M3FN, rotate = hadamard, rotate_seed = 1>
  }
}
