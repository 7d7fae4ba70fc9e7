// Sharing codes needs identical bit-widths and grouping, inside the model.
kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 (1-bit) cannot share codes with layer 2 (2-bit): bit-widths differ}}
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layers 3 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}
