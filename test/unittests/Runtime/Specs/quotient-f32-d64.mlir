// Model values in f32, so that a group's quotients (x - z) / s can lie
// within an f32 ulp of a code's rounding boundary: the quotient tests.
kvq.cache @quotient_f32_d64 model <layers = 3, heads = 2, kv_heads = 1, head_dim = 64, dtype = f32> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 1 to 2 : #kvq.quant<bits = 4, mode = sym, span = tokens, group = 32>
    kvq.layers 2 to 3 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32, params = f8E4M3FN>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 32>
    kvq.layers 1 to 2 : #kvq.quant<bits = 3, mode = hybrid, span = channels, group = 32>
    kvq.layers 2 to 3 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, params = f8E4M3FN>
  }
}
