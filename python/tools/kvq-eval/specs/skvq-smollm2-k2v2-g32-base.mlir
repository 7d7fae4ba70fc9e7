// Calibrated by `kvq-calibrate --out python/tools/kvq-eval/specs/skvq-smollm2-k2v2-g32-base.mlir --group 32 --reorder none --clip none`
// from skvq-k2v2-g128: reorder = none, clip = none, group = 32 (tensors: keys, values).
// Activations: SmolLM2-135M-Instruct over the first 768 tokens of /usr/share/common-licenses/MPL-1.1; calibration on the first 512 tokens, errors on the 256 after them.
// | held-out relative error, mean of layers | base | calibrated |
// |---|---|---|
// | keys | 0.4417 | 0.4417 |
// | values | 0.3897 | 0.3897 |
// | attention | 0.7256 | 0.7256 |
kvq.cache @skvq_smollm2_k2v2_g32_base model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16, channel_order = interleaved> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92>
  }
}
