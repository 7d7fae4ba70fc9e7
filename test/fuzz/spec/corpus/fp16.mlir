// The unquantized baseline every scheme is measured against: keys and values
// in fp16, paged, Llama-2-7B shape (Touvron et al. 2023: 32 layers, 32 heads,
// MHA, head_dim 128). No window is needed: every token goes straight to a page.
kvq.cache @fp16 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}
