// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// Bits out of range.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{bits must be in [1, 8], got 9}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 9, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{bits must be in [1, 8], got 0}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 0, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Symmetric codes need a sign bit.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{'sym' mode needs at least 2 bits: a 1-bit code has no room for a sign}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 1, mode = sym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    // expected-error @+1 {{'hybrid' mode needs at least 2 bits: a 1-bit code has no room for a sign}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 1, mode = hybrid, span = tokens, group = 32>
  }
}

// -----

// span = channels groups must tile head_dim.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op group size 48 does not divide head_dim 64 (span = channels)}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 48>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// span = tokens groups are whole flushes.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 96, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op flush unit 1 of the keys is not a multiple of the group size 32 (span = tokens groups whole flushes)}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Pages hold whole flushes.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 100 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  // expected-error @+1 {{'kvq.values' op page size 100 is not a multiple of the values flush unit 32}}
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = sym, span = tokens, group = 32>
  }
}

// -----

// eta keeps the two levels of a 1-bit code apart.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{eta must be in [0, 0.5), got 0.5}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/2>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{eta must be in [0, 0.5), got -0.1}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = -0.1>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Clipping shrinks the range, never grows it.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{clipping factor must be in (0, 1], got 1.5}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = 1.5>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{clipping factor must be in (0, 1], got 0.0}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = 0.0>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{clipping factors must be in (0, 1], got 1.25}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = dense<[[[0.9, 1.25]]]> : tensor<1x1x2xf32>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op clip table must have shape 1x1x2}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = dense<0.9> : tensor<1x1x4xf32>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// A channel permutation must be one.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op reorder perm of layer 0, kv-head 0 is not a permutation of [0, 4)}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2,
        reorder = #kvq.reorder<perm = dense<[[[0, 1, 1, 3]]]> : tensor<1x1x4xi32>, sizes = dense<[[[1, 3]]]> : tensor<1x1x2xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op reorder perm of layer 0, kv-head 0 is not a permutation of [0, 4)}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2,
        reorder = #kvq.reorder<perm = dense<[[[0, 1, 2, 4]]]> : tensor<1x1x4xi32>, sizes = dense<[[[1, 3]]]> : tensor<1x1x2xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

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

// -----

// A stated channel order is the order pre-RoPE keys are rotated in.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16, channel_order = interleaved> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op pre_rope rotates in half order, the model's channel_order is interleaved}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
    // expected-error @+1 {{'kvq.layers' op pre_rope rotates in interleaved order where an earlier layer rotates in half order: a cache takes its keys in one channel order}}
    kvq.layers 1 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = interleaved>>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 2 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{channel_order pairs channels, head_dim 63 is odd}}
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 63, dtype = f16, channel_order = half> page 32 {
}

// -----

// GQA needs whole groups of query heads.
// expected-error @+1 {{heads (32) must be a multiple of kv_heads (6)}}
kvq.cache @c model <layers = 1, heads = 32, kv_heads = 6, head_dim = 64, dtype = f16> page 32 {
}

// -----

// Layer ranges: no overlap, no gap, nothing past the last layer.
kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    // expected-error @+1 {{'kvq.layers' op layer range [28, 32) overlaps [0, 30) at layer 28}}
    kvq.layers 28 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  // expected-error @+1 {{'kvq.keys' op layer 30 is not covered by any kvq.layers range}}
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    // expected-error @+1 {{'kvq.layers' op layer range [0, 33) goes past the last layer 31}}
    kvq.layers 0 to 33 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 32, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    // expected-error @+1 {{'kvq.layers' op layer range [4, 4) is empty}}
    kvq.layers 4 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

// Sharing codes needs identical bit-widths and grouping, inside the model.
kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 (1-bit) cannot share codes with layer 2 (2-bit): bit-widths differ}}
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layers 3 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}

// -----

kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 cannot share codes with layer 2: grouping or mode differs}}
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
    kvq.layers 3 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 64>
  }
}

// -----

kvq.cache @c model <layers = 5, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 5 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 would reuse the codes of layer 5, past the last layer 4}}
  kvq.values window <recent = 129, flush = 1> share <from = 2, group = 3, owner = 2> {
    kvq.layers 0 to 5 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}

// -----

kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 1 cannot share codes with layer 0: full-precision layers have no codes}}
  kvq.values window <recent = 129, flush = 1> share <from = 0> {
    kvq.layers 0 to 4 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layer 0 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32> codes from 0
    kvq.layer 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
    // expected-error @+1 {{'kvq.layer' op layer 3 (2-bit) cannot share codes with layer 2 (1-bit): bit-widths differ}}
    kvq.layer 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 2
  }
}

// -----

kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layer' op expected layer 0 at this position, got 1}}
    kvq.layer 1 : #kvq.full_precision
    kvq.layer 0 : #kvq.full_precision
  }
}

// -----

kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op mixes kvq.layers ranges with expanded kvq.layer ops}}
  kvq.values window <recent = 0, flush = 1> {
    kvq.layer 0 : #kvq.full_precision
    kvq.layers 1 to 2 : #kvq.full_precision
  }
}

// -----

// Key-only features.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op key_norm and pre_rope apply to keys only}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32, key_norm = true>
  }
}

// -----

// Pre-RoPE values, and a rotation wider than the head.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op key_norm and pre_rope apply to keys only}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op pre_rope rotates 128 dims, more than head_dim 64}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 128, style = half>>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Structure of a cache.
// expected-error @+1 {{'kvq.cache' op needs exactly one kvq.keys and one kvq.values, got 1 and 0}}
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{'kvq.cache' op outlier pool first_layer 4 is past the last layer 1}}
kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 4> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}

// -----

// expected-error @+1 {{'kvq.cache' op an outlier pool needs keys and values to flush together, got flush units 128 and 1}}
kvq.cache @c model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64>
  }
}

// -----

// The window capacity recent + flush - 1 wrapped to 0 in 32 bits, so tokens
// the spec keeps in full precision were quantized.
kvq.cache @huge_recent model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  // expected-error @+1 {{sink, recent and flush must be at most 1048576 tokens, got sink = 0, recent = 4294967295, flush = 2}}
  kvq.keys window <recent = 4294967295, flush = 2> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

kvq.cache @huge_sink model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
  // expected-error @+1 {{sink, recent and flush must be at most 1048576 tokens}}
  kvq.values window <sink = 2000000, recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// expected-error @+1 {{outlier pool capacity and extra must be at most 1048576 tokens}}
kvq.cache @huge_pool model <layers = 1, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 4294967295> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}

// -----

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
