// Ablation for kvq-eval: KIVI-2's keys (per-channel 2-bit, G = 32, R = 128),
// values left in fp16. With kivi-2bit-values-only, it asks which of the two
// tensors the model is more sensitive to (KIVI, section 3; XQuant, Table 1).
kvq.cache @kivi_2bit_keys_only model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}
