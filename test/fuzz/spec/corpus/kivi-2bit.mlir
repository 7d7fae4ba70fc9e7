// KIVI-2 (Liu et al., "KIVI: A Tuning-Free Asymmetric 2bit Quantization for
// KV Cache", ICML 2024): keys per-channel (span = tokens), values per-token
// (span = channels), 2-bit asym, group size G = 32, residual R = 128, fp16
// scale and zero-point. Llama-2-7B shape.
//
// KIVI attends before it flushes; numerics.md section 1 maps that to this
// flush rule with a window one larger: keys keep a growing fp16 tail and
// quantize all R at once (recent = 1, flush = R); values quantize their
// oldest token once R + 1 are held (recent = R + 1, flush = 1).
kvq.cache @kivi_2bit model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
