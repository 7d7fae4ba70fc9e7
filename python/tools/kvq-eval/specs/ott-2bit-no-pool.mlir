// Ablation of specs/ott-2bit.mlir: the same 2-bit keys and values (G = 128,
// flush 128, residual 32) without OTT's outlier pools, so that kvq-eval
// measures what the pools buy (docs/Evaluation.md, "OTT's outlier pools").
kvq.cache @ott_2bit_no_pool model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}
