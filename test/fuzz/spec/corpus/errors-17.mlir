// Layer ranges: no overlap, no gap, nothing past the last layer.
kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    // expected-error @+1 {{'kvq.layers' op layer range [28, 32) overlaps [0, 30) at layer 28}}
    kvq.layers 28 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}
