// XQuant (Yang et al., "XQuant: Achieving Ultra-Low Bit KV Cache Quantization
// with Cross-Layer Compression", EMNLP 2025), Table 8's CoQA row for
// Mistral-7B-v0.3: kq = 30, vq = 2, km = 32, vm = 16, eta1 = 1/6,
// eta2 = 0.045 (1.375 bits, "1.38" in Tables 3 and 8). KIVI framework:
// G = 32, R = 128, keys span = tokens, values span = channels.
// Layers below kq (keys) / vq (values) are 2-bit with eta2, the rest 1-bit
// with eta1; odd value layers from vm on reuse the codes of the layer below.
// Mistral-7B-v0.3 shape: 32 layers, 32 query heads, 8 kv heads.
kvq.cache @xquant_mistral_7b model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
    kvq.layers 30 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 16> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, eta = 0.045>
    kvq.layers 2 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}
