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
