// InnerQ-Small (InnerQ, Table 3): keys 3-bit sym (span = channels) with key
// normalisation, values 2-bit sym (span = tokens), G = 32, fp16 scales
// (3.0 bits); 32 sink and 96 recent tokens. Llama-3.1-8B shape.
kvq.cache @innerq_small model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = sym, span = tokens, group = 32>
  }
}
