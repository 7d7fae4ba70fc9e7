// span = tokens groups are whole flushes.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 96, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op flush unit 1 of the keys is not a multiple of the group size 32 (span = tokens groups whole flushes)}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
