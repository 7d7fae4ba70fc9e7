// SKVQ K2V2 g128 (Duanmu et al., "SKVQ: Sliding-window Key and Value Cache
// Quantization for Large Language Models", COLM 2024), Table 4: keys and
// values 2-bit asym, per-token groups of 128 channels (span = channels),
// scale and zero-point stored as FP8 E4M3 (2.125 bits), sliding window 128
// with 5 sink tokens, one token flushed per step, clipping factor 0.92 for K
// and V as in SKVQ's released code. Channel reorder needs calibration on
// real data; see skvq-reorder-small.mlir for a spec that exercises it.
// Llama-2-7B shape.
kvq.cache @skvq_k2v2_g128 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, clip = 0.92>
  }
}
