// specs/kivi-2bit.mlir's scheme on the benchmark shape (one layer, 32 query
// heads, 8 kv heads, head_dim 128).
kvq.cache @kivi_2bit_gqa model <layers = 1, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
