// The window capacity recent + flush - 1 wrapped to 0 in 32 bits, so tokens
// the spec keeps in full precision were quantized.
kvq.cache @huge_recent model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  // expected-error @+1 {{sink, recent and flush must be at most 1048576 tokens, got sink = 0, recent = 4294967295, flush = 2}}
  kvq.keys window <recent = 4294967295, flush = 2> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
