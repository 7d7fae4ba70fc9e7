kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    // expected-error @+1 {{'hybrid' mode needs at least 2 bits: a 1-bit code has no room for a sign}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 1, mode = hybrid, span = tokens, group = 32>
  }
}
