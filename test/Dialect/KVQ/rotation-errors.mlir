// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// `rotate = hadamard` (docs/Numerics.md, "Hadamard rotation"): what it
// cannot be combined with is rejected where the scheme is written.

// A seed is for a random-sign rotation only.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{rotate_seed needs rotate = hadamard}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate_seed = 7>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Pre-RoPE keys are rotated by position after dequantization.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{rotate = hadamard cannot rotate pre_rope keys: the attention kernel applies RoPE to dequantized keys, and RoPE does not commute with the rotation}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32, rotate = hadamard, pre_rope = <theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// InnerQ's key norms are per unrotated channel.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{rotate = hadamard cannot be combined with key_norm: the norms are of unrotated channels}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true, rotate = hadamard>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// SKVQ's reorder tables order unrotated channels.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{rotate = hadamard cannot be combined with a channel reorder: its tables order unrotated channels}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2, reorder = <perm = dense<[[[1, 0, 3, 2]]]> : tensor<1x1x4xi32>, sizes = dense<[[[1, 3]]]> : tensor<1x1x2xi32>>, rotate = hadamard>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// The fast Walsh-Hadamard transform needs a power-of-two head_dim.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 96, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+1 {{'kvq.layers' op rotate = hadamard needs head_dim a power of two, got 96}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Shared codes must mean the same thing: the same rotation and signs.
kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op layer 3 cannot share codes with layer 2: their rotations differ}}
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 3 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 2>
  }
}

// -----

// The same rotation on owner and sharer is accepted.
kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, rotate = hadamard>
  }
}

// -----

kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    // expected-error @+2 {{expected one of [none, hadamard] for rotation of a token's channels before quantization, got: walsh}}
    // expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'rotate'}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = walsh>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// OTT's pools keep their tokens unrotated.
kvq.cache @c model <layers = 4, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 2> {
  kvq.keys window <recent = 32, flush = 128> {
    // expected-error @+1 {{'kvq.layers' op rotate = hadamard cannot be combined with OTT outlier pools: pooled tokens are kept unrotated}}
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128, rotate = hadamard>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64>
  }
}
