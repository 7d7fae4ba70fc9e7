// XQuant (Yang et al., EMNLP 2025), Tables 2 and 8 for Llama-2-7B:
// kq = 28, vq = 0, km = 32, vm = 28, eta1 = 1/3, eta2 = 0 (1.40625 bits,
// "1.4"). KIVI framework: G = 32, R = 128. Llama-2-7B shape.
kvq.cache @xquant_llama2_7b model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 28 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 28 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/3>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 28> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/3>
  }
}
