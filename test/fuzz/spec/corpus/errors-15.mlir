kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op reorder group sizes of layer 0, kv-head 0 sum to 5, not head_dim 4}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2,
        reorder = #kvq.reorder<perm = dense<[[[3, 2, 1, 0]]]> : tensor<1x1x4xi32>, sizes = dense<[[[2, 3]]]> : tensor<1x1x2xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
