kvq.cache @c0 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c1 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c2 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c3 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c4 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c5 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c6 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c7 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c8 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c9 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c10 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c11 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c12 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c13 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c14 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c15 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c16 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c17 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c18 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c19 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c20 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c21 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c22 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c23 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c24 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c25 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c26 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c27 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c28 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c29 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c30 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c31 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c32 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c33 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c34 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c35 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c36 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c37 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c38 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c39 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c40 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c41 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c42 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c43 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c44 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c45 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c46 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c47 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c48 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c49 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c50 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c51 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c52 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c53 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c54 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c55 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c56 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c57 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c58 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c59 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c60 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c61 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c62 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c63 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
kvq.cache @c64 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
