// expected-error @+1 {{outlier pool capacity and extra must be at most 1048576 tokens}}
kvq.cache @huge_pool model <layers = 1, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 4294967295> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}
