kvq.cache @".." model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @other model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
