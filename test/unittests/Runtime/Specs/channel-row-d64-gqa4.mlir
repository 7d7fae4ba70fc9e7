// span=channels keys whose group is the whole head (one group a token:
// the pair form's groups vector of one), 4-bit asym, on a 2-layer test
// model: heads = 8, kv_heads = 2, head_dim = 64. AttendProgramTests.
kvq.cache @channel_row_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 32, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 64>
  }
  kvq.values window <sink = 32, recent = 32, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32>
  }
}
