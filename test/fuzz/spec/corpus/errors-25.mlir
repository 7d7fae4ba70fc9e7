kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layer 0 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32> codes from 0
    kvq.layer 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
    // expected-error @+1 {{'kvq.layer' op layer 3 (2-bit) cannot share codes with layer 2 (1-bit): bit-widths differ}}
    kvq.layer 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 2
  }
}
