// AsymKV-32/0 (Tao et al., "AsymKV: Enabling 1-Bit Quantization of KV Cache
// with Layer-Wise Asymmetric Quantization Configurations", COLING 2025; the
// configuration XQuant's appendix A compares against): on KIVI's framework
// (G = 32, R = 128, keys span = tokens, values span = channels), key layers
// below l_k = 32 are 2-bit and value layers below l_v = 0 are 2-bit, every
// other layer 1-bit. Here: all keys 2-bit, all values 1-bit (1.5 bits).
// Llama-2-7B shape.
kvq.cache @asymkv_32_0 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}
