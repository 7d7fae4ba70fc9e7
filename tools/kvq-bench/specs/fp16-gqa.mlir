// Benchmark shape of the fp16 baseline: one layer of a GQA model with 32
// query heads, 8 kv heads, head_dim 128 (Llama-3-8B, Mistral-7B).
kvq.cache @fp16_gqa model <layers = 1, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
