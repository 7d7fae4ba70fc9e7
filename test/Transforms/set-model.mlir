// RUN: kvq-opt %s -split-input-file --kvq-set-model="layers=30 heads=9 kv_heads=3 head_dim=64" | FileCheck %s

// AsymKV-16/0 on 32 layers: the first half of the key layers stay 2-bit.
// New layer i takes old layer floor((i + 1/2) * 32 / 30).
// CHECK-LABEL: kvq.cache @asymkv model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16> page 128
// CHECK:      kvq.keys window <recent = 1, flush = 128> {
// CHECK-NEXT:   kvq.layers 0 to 15 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
// CHECK-NEXT:   kvq.layers 15 to 30 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
// CHECK-NEXT: }
// CHECK:      kvq.layers 0 to 30 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
kvq.cache @asymkv model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16, scale = 0.1> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 16 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 16 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}

// -----

// XQuant on Mistral-7B: kq = 30 of 32 becomes 28 of 30; the sharing start
// 16 moves to the first new layer at its depth (15), rounded up to the
// sharing group (16). A full rotary embedding follows head_dim and keeps
// its frequency scaling.
// CHECK-LABEL: kvq.cache @xquant
// CHECK:      kvq.layers 0 to 28 : #kvq.quant<bits = 2, {{.*}}pre_rope = #kvq.rope<theta = 1.000000e+04 : f64, dims = 64, style = half, scaling = <kind = linear, factor = 2.000000e+00 : f64>>>
// CHECK-NEXT: kvq.layers 28 to 30 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
// CHECK:      kvq.values window <recent = 129, flush = 1> share <from = 16> {
// CHECK-NEXT:   kvq.layers 0 to 2 : #kvq.quant<bits = 2
// CHECK-NEXT:   kvq.layers 2 to 30 : #kvq.quant<bits = 1
kvq.cache @xquant model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045, pre_rope = #kvq.rope<theta = 10000.0, dims = 128, style = half, scaling = #kvq.rope_scaling<kind = linear, factor = 2.0>>>
    kvq.layers 30 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 16> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, eta = 0.045>
    kvq.layers 2 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}

// -----

// Sharing that starts past the last new layer is dropped; a pool's first
// tracked layer moves by depth (8 of 32 -> 7 of 30, old layer 8).
// CHECK-LABEL: kvq.cache @late_share
// CHECK-SAME:  pool <capacity = 3, extra = 32, first_layer = 7>
// CHECK:       kvq.values window <recent = 129, flush = 1> {
// CHECK-NEXT:    kvq.layers 0 to 30 :
kvq.cache @late_share model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 8> {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 31> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// Calibrated tables survive a change that keeps layers, kv-heads and
// head_dim (here the query heads): they still describe the
// model. Any other change is an error (set-model-errors.mlir).
// CHECK-LABEL: kvq.cache @calibrated model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = bf16>
// CHECK: clip = dense<{{.*}}> : tensor<30x3x2xf32>
kvq.cache @calibrated model <layers = 30, heads = 3, kv_heads = 3, head_dim = 64, dtype = bf16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = dense<0.9> : tensor<30x3x2xf32>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 30 : #kvq.full_precision
  }
}

// -----

// A rotation and its seed are kept when the model changes.
// CHECK-LABEL: kvq.cache @rotated
// CHECK: kvq.layers 0 to 30 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
// CHECK: kvq.layers 0 to 30 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 7>
kvq.cache @rotated model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard>
  }
  kvq.values window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 7>
  }
}
