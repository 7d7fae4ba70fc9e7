// InnerQ-Base (InnerQ: hardware-aware KV cache quantization by grouping along
// the inner dimension), Table 3: keys 3-bit sym grouped along channels
// (the inner dimension of q.K^T, span = channels), values 3-bit sym grouped
// along tokens (the inner dimension of p.V, span = tokens), G = 32, fp16
// scales (3.5 bits); per-channel key normalisation computed from the prompt;
// 32 sink and 96 recent tokens in fp16. Keys are flushed a token at a time,
// values a group (32 tokens) at a time. Llama-3.1-8B shape.
kvq.cache @innerq_base model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
