// InnerQ-Hybrid (InnerQ, Table 3): as InnerQ-Base, but values are 2-bit
// hybrid: each group keeps the sym or asym reconstruction with the smaller
// squared error, the choice carried in the sign of its fp16 scale, with a
// dense fp16 zero-point (3.25 bits). Llama-3.1-8B shape.
kvq.cache @innerq_hybrid model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
  }
}
