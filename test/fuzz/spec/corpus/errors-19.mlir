kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    // expected-error @+1 {{'kvq.layers' op layer range [0, 33) goes past the last layer 31}}
    kvq.layers 0 to 33 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}
