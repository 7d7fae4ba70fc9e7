// specs/innerq-base.mlir's scheme on the benchmark shape (one layer).
kvq.cache @innerq_base_gqa model <layers = 1, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
