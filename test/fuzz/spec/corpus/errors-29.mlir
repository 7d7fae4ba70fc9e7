// Structure of a cache.
// expected-error @+1 {{'kvq.cache' op needs exactly one kvq.keys and one kvq.values, got 1 and 0}}
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
