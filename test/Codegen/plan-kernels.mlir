// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels | FileCheck %s

// One flush kernel per distinct (tensor, scheme), one attend kernel per
// distinct (key scheme, value scheme), each listing the layers it serves.
// CHECK-LABEL: kvq.cache @mixed
// CHECK:      kvq.flush_kernel @mixed_flush_keys_0 of @mixed keys layers [0, 1, 3]
// CHECK-NEXT: kvq.flush_kernel @mixed_flush_keys_1 of @mixed keys layers [2]
// CHECK-NEXT: kvq.flush_kernel @mixed_flush_values_0 of @mixed values layers [0, 1, 2, 3]
// CHECK-NEXT: kvq.keynorm_kernel @mixed_keynorm of @mixed layers [0, 1, 3]
// CHECK-NEXT: kvq.attend_kernel @mixed_attend_0 of @mixed layers [0, 1, 3]
// CHECK-NEXT: kvq.attend_kernel @mixed_attend_1 of @mixed layers [2]
kvq.cache @mixed model <layers = 4, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 2 to 3 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32>
    kvq.layers 3 to 4 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
  }
}

// OTT: one track kernel for every tracked layer; attention specializes on
// the pools, so untracked layer 0 has its own attend kernel.
// CHECK-LABEL: kvq.cache @ott
// CHECK:      kvq.flush_kernel @ott_flush_keys_0 of @ott keys layers [0, 1, 2]
// CHECK-NEXT: kvq.flush_kernel @ott_flush_values_0 of @ott values layers [0, 1, 2]
// CHECK-NEXT: kvq.track_kernel @ott_track of @ott layers [1, 2]
// CHECK-NEXT: kvq.attend_kernel @ott_attend_0 of @ott layers [0]
// CHECK-NEXT: kvq.attend_kernel @ott_attend_1 of @ott layers [1, 2]
kvq.cache @ott model <layers = 3, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 pool <capacity = 3, extra = 8, first_layer = 1> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64>
  }
}

// Per-layer reorder and clip tables: layers of one scheme share kernels
// (their tables are rows of the kernel's, picked by tableRow) wherever a
// token's codes take as many words; keys of layer 1 take 4, layers 0 and 2
// take 5.
// CHECK-LABEL: kvq.cache @tables
// CHECK:      kvq.flush_kernel @tables_flush_keys_0 of @tables keys layers [0, 2]
// CHECK-NEXT: kvq.flush_kernel @tables_flush_keys_1 of @tables keys layers [1]
// CHECK-NEXT: kvq.flush_kernel @tables_flush_values_0 of @tables values layers [0, 1, 2]
// CHECK-NEXT: kvq.attend_kernel @tables_attend_0 of @tables layers [0, 2]
// CHECK-NEXT: kvq.attend_kernel @tables_attend_1 of @tables layers [1]
kvq.cache @tables model <layers = 3, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16,
                         reorder = #kvq.reorder<perm = dense<[[[0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 1, 6, 11, 16, 21, 26, 31, 36, 41, 46, 51, 56, 61, 2, 7, 12, 17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 3, 8, 13, 18, 23, 28, 33, 38, 43, 48, 53, 58, 63, 4, 9, 14, 19, 24, 29, 34, 39, 44, 49, 54, 59], [3, 10, 17, 24, 31, 38, 45, 52, 59, 2, 9, 16, 23, 30, 37, 44, 51, 58, 1, 8, 15, 22, 29, 36, 43, 50, 57, 0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 6, 13, 20, 27, 34, 41, 48, 55, 62, 5, 12, 19, 26, 33, 40, 47, 54, 61, 4, 11, 18, 25, 32, 39, 46, 53, 60]], [[7, 16, 25, 34, 43, 52, 61, 6, 15, 24, 33, 42, 51, 60, 5, 14, 23, 32, 41, 50, 59, 4, 13, 22, 31, 40, 49, 58, 3, 12, 21, 30, 39, 48, 57, 2, 11, 20, 29, 38, 47, 56, 1, 10, 19, 28, 37, 46, 55, 0, 9, 18, 27, 36, 45, 54, 63, 8, 17, 26, 35, 44, 53, 62], [10, 21, 32, 43, 54, 1, 12, 23, 34, 45, 56, 3, 14, 25, 36, 47, 58, 5, 16, 27, 38, 49, 60, 7, 18, 29, 40, 51, 62, 9, 20, 31, 42, 53, 0, 11, 22, 33, 44, 55, 2, 13, 24, 35, 46, 57, 4, 15, 26, 37, 48, 59, 6, 17, 28, 39, 50, 61, 8, 19, 30, 41, 52, 63]], [[14, 27, 40, 53, 2, 15, 28, 41, 54, 3, 16, 29, 42, 55, 4, 17, 30, 43, 56, 5, 18, 31, 44, 57, 6, 19, 32, 45, 58, 7, 20, 33, 46, 59, 8, 21, 34, 47, 60, 9, 22, 35, 48, 61, 10, 23, 36, 49, 62, 11, 24, 37, 50, 63, 12, 25, 38, 51, 0, 13, 26, 39, 52, 1], [17, 32, 47, 62, 13, 28, 43, 58, 9, 24, 39, 54, 5, 20, 35, 50, 1, 16, 31, 46, 61, 12, 27, 42, 57, 8, 23, 38, 53, 4, 19, 34, 49, 0, 15, 30, 45, 60, 11, 26, 41, 56, 7, 22, 37, 52, 3, 18, 33, 48, 63, 14, 29, 44, 59, 10, 25, 40, 55, 6, 21, 36, 51, 2]]]> : tensor<3x2x64xi32>,
                                                sizes = dense<[[[10, 22, 16, 16], [16, 16, 16, 16]], [[16, 16, 16, 16], [16, 16, 16, 16]], [[16, 16, 4, 28], [16, 16, 16, 16]]]> : tensor<3x2x4xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16,
                         clip = dense<[[[0.5, 0.53125, 0.5625, 0.59375], [0.625, 0.65625, 0.6875, 0.71875]], [[0.75, 0.78125, 0.8125, 0.84375], [0.875, 0.90625, 0.9375, 0.96875]], [[0.5, 0.53125, 0.5625, 0.59375], [0.625, 0.65625, 0.6875, 0.71875]]]> : tensor<3x2x4xf32>>
  }
}
