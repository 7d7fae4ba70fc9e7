// Clip factors that are exact small fractions print as `n/d` and parse back.
kvq.cache @fractions model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, clip = 0.5>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = 2/3>
  }
}
