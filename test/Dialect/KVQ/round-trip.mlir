// RUN: kvq-opt %s | kvq-opt | FileCheck %s
// RUN: kvq-opt %s -verify-roundtrip -o /dev/null

// CHECK-LABEL: kvq.cache @every_feature
// CHECK-SAME: model <layers = 6, heads = 8, kv_heads = 2, head_dim = 64, dtype = bf16, scale = 1.250000e-01 : f64, channel_order = half> page 64 pool <capacity = 3, extra = 32, first_layer = 2> {
// CHECK-NEXT: kvq.keys window <sink = 4, recent = 32, flush = 64> {
// CHECK-NEXT: kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
// CHECK-NEXT: kvq.layers 2 to 6 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 64, params = bf16, eta = 1/6, key_norm = true, pre_rope = #kvq.rope<theta = 1.000000e+04 : f64, dims = 64, style = half>>
// CHECK-NEXT: }
// CHECK-NEXT: kvq.values window <sink = 4, recent = 32, flush = 64> share <from = 1, group = 3, owner = 1> {
// CHECK-NEXT: kvq.layers 0 to 6 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 16, params = f8E4M3FN, levels = 5, clip = 0.92>
// CHECK-NEXT: }
// CHECK-NEXT: }
kvq.cache @every_feature model <layers = 6, heads = 8, kv_heads = 2, head_dim = 64, dtype = bf16, scale = 0.125, channel_order = half> page 64 pool <capacity = 3, extra = 32, first_layer = 2> {
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
// CHECK-LABEL: kvq.cache @modes
// CHECK: kvq.layer 0 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32>
// CHECK-NEXT: kvq.layer 1 : #kvq.quant<bits = 2, mode = hybrid, span = channels, group = 32, params = f32>
// CHECK: kvq.layer 0 : #kvq.full_precision
// CHECK-NEXT: kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
// CHECK-NEXT: kvq.layer 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = dense<{{\[}}{{\[}}[5.000000e-01, 7.500000e-01]], {{\[}}[1.000000e+00, 2.500000e-01]], {{\[}}[1.000000e+00, 1.000000e+00]]]> : tensor<3x1x2xf32>> codes from 1
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

// -----

// Clip factors that are exact small fractions print as `n/d` and parse back.
// CHECK-LABEL: kvq.cache @fractions
// CHECK: clip = 1/2>
// CHECK: clip = 2/3>
kvq.cache @fractions model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, clip = 0.5>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = 2/3>
  }
}

// -----

// Rotary embeddings: interleaved (the other style is @every_feature's; one
// cache rotates in one), linear and Llama 3 frequency scaling.
// CHECK-LABEL: kvq.cache @rope_scaling
// CHECK: kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 1.000000e+04 : f64, dims = 64, style = interleaved>>
// CHECK-NEXT: kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 1.000000e+04 : f64, dims = 32, style = interleaved, scaling = <kind = linear, factor = 4.000000e+00 : f64>>>
// CHECK-NEXT: kvq.layer 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, pre_rope = #kvq.rope<theta = 5.000000e+05 : f64, dims = 64, style = interleaved, scaling = <kind = llama3, factor = 8.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, high_freq_factor = 4.000000e+00 : f64, original_max_position = 8192>>>
kvq.cache @rope_scaling model <layers = 3, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 1, flush = 32> {
    kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = interleaved>>
    kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 32, style = interleaved, scaling = #kvq.rope_scaling<kind = linear, factor = 4.0>>>
    kvq.layer 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32,
                             pre_rope = #kvq.rope<theta = 500000.0, dims = 64, style = interleaved,
                                                  scaling = #kvq.rope_scaling<kind = llama3, factor = 8.0, low_freq_factor = 1.0,
                                                                              high_freq_factor = 4.0, original_max_position = 8192>>>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// Optional keys written with their default values: `params = f16` and
// `key_norm = false` are elided, `levels = 2^bits` and `clip = 1` are kept
// (given, so printed), and a nested #kvq.rope may drop its prefix.
// CHECK-LABEL: kvq.cache @defaults
// CHECK: kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, levels = 4, clip = 1.0, pre_rope = #kvq.rope<theta = 1.000000e+04 : f64, dims = 64, style = half>>
// CHECK: kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
kvq.cache @defaults model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, params = f16, levels = 4, clip = 1, key_norm = false,
                                   pre_rope = <theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, key_norm = false>
  }
}

// -----

// A Hadamard rotation per layer, plain or with random signs from a seed;
// `rotate = none` is the default and is elided.
// CHECK-LABEL: kvq.cache @rotated
// CHECK: kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
// CHECK: kvq.layers 1 to 2 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32>
// CHECK: kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 7>
kvq.cache @rotated model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
    kvq.layers 1 to 2 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = none>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<rotate_seed = 7, bits = 4, mode = sym, span = channels, group = 32, rotate = hadamard>
  }
}
