// Ablation for kvq-eval: KIVI-2's values (per-token 2-bit, G = 32, R = 128),
// keys left in fp16 (see kivi-2bit-keys-only.mlir).
kvq.cache @kivi_2bit_values_only model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
