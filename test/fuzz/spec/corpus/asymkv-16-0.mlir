// AsymKV-16/0 (Tao et al., COLING 2025): key layers below l_k = 16 are
// 2-bit, the other key layers and every value layer 1-bit (1.25 bits).
// KIVI framework (G = 32, R = 128), Llama-2-7B shape.
kvq.cache @asymkv_16_0 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 16 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 16 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}
