kvq.cache @c model <layers = 5, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 5 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 would reuse the codes of layer 5, past the last layer 4}}
  kvq.values window <recent = 129, flush = 1> share <from = 2, group = 3, owner = 2> {
    kvq.layers 0 to 5 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}
