// OTT 2-bit (Su et al., "Accurate KV Cache Quantization with Outlier Tokens
// Tracing", ACL 2025): KIVI's grouping (keys span = tokens, values
// span = channels), 2-bit asym, G = 128, residual 32: both tensors flush G
// tokens at a time with 32 recent tokens kept. An outlier pool of 3 tokens
// per (layer, kv-head) plus an extra pool of 32; the first 2 layers are not
// tracked. LLaMA-3-8B shape (32 layers, 32 query heads, 8 kv heads).
kvq.cache @ott_2bit model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 2> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}
