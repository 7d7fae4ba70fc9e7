kvq.cache @every_feature model <layers = 6, heads = 8, kv_heads = 2, head_dim = 64, dtype = bf16, scale = 0.125> page 64 pool <capacity = 3, extra = 32, first_layer = 2> {
  kvq.keys window <sink = 4, recent = 32, flush = 64> {
    kvq.layers 0 to 2 : #kvq.quant<mode = asym, bits = 2, group = 32, span = tokens, eta = 0.045, params = f16>
    kvq.layers 2 to 6 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 64, params = bf16, eta = 1/6, key_norm = true,
                                   pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <sink = 4, recent = 32, flush = 64> share <from = 1, group = 3, owner = 1> {
    kvq.layers 0 to 6 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 16, params = f8E4M3FN, levels = 5, clip = 0.92>
  }
}

// Full precision, sym and hybrid modes, per-group clipping, expanded layers.
kvq.cache @modes model <layers = 3, heads = 1, kv_heads = 1, head_dim = 64, dtype = f32> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layer 0 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 2, mode = hybrid, span = channels, group = 32, params = f32>
    kvq.layer 2 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layer 0 : #kvq.full_precision
    kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layer 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32,
                             clip = dense<[[[0.5, 0.75]], [[1.0, 0.25]], [[1.0, 1.0]]]> : tensor<3x1x2xf32>> codes from 1
  }
}
