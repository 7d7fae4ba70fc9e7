kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layer' op expected layer 0 at this position, got 1}}
    kvq.layer 1 : #kvq.full_precision
    kvq.layer 0 : #kvq.full_precision
  }
}
