// Pages hold whole flushes.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 100 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  // expected-error @+1 {{'kvq.values' op page size 100 is not a multiple of the values flush unit 32}}
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = sym, span = tokens, group = 32>
  }
}
