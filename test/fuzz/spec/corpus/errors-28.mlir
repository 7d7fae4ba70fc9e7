// Key-only features.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op key_norm and pre_rope apply to keys only}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32, key_norm = true>
  }
}
