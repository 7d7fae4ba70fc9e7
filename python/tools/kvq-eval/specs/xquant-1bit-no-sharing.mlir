// Ablation for kvq-eval: xquant-llama2-7b without cross-layer code sharing
// (the same 2-bit/1-bit schedule and eta, every layer storing its own value
// codes), to see what sharing costs on a small model.
kvq.cache @xquant_1bit_no_sharing model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 28 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 28 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/3>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/3>
  }
}
