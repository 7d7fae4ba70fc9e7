// GQA needs whole groups of query heads.
// expected-error @+1 {{heads (32) must be a multiple of kv_heads (6)}}
kvq.cache @c model <layers = 1, heads = 32, kv_heads = 6, head_dim = 64, dtype = f16> page 32 {
}
