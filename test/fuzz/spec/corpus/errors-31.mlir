// expected-error @+1 {{'kvq.cache' op an outlier pool needs keys and values to flush together, got flush units 128 and 1}}
kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64>
  }
}
