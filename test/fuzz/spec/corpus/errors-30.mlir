// expected-error @+1 {{'kvq.cache' op outlier pool first_layer 4 is past the last layer 1}}
kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 4> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}
