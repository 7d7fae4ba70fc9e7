// A 2^32-element splat aborted kvq-opt when its elements were materialized;
// the size is checked on the type first.
kvq.cache @huge_clip model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    // expected-error @+1 {{clip table has 4294967296 elements; at most 16777216}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = dense<0.9> : tensor<4294967296xf32>>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
