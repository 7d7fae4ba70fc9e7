// RUN: kvq-opt %s | kvq-opt | FileCheck %s

kvq.cache @c model <layers = 2, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 4, recent = 32, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 4, recent = 32, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
    kvq.layers 1 to 2 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
// CHECK: kvq.flush_kernel @fk of @c keys layers [0, 1]
kvq.flush_kernel @fk of @c keys layers [0, 1]
// CHECK: kvq.flush_kernel @fv0 of @c values layers [0]
kvq.flush_kernel @fv0 of @c values layers [0]
// CHECK: kvq.keynorm_kernel @kn of @c layers [0, 1]
kvq.keynorm_kernel @kn of @c layers [0, 1]
// CHECK: kvq.attend_kernel @a1 of @c layers [1]
kvq.attend_kernel @a1 of @c layers [1]

// CHECK-LABEL: func.func @dequantize
// CHECK: kvq.dequantize %arg0, %arg1, %arg2 : <bits = 2, mode = hybrid, span = tokens, group = 32>
func.func @dequantize(%code: i32, %scale: f32, %zero: f32) -> f32 {
  %x = kvq.dequantize %code, %scale, %zero : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
  return %x : f32
}

