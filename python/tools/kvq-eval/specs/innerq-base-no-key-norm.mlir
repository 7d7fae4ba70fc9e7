// Variant for kvq-eval: InnerQ-base (specs/innerq-base.mlir) with its
// channel-grouped keys neither normalised nor rotated: the baseline of
// innerq-base-no-key-norm-rotated.mlir. The same bits.
kvq.cache @innerq_base_no_key_norm model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
