// RUN: kvq-opt %s --kvq-expand-dequantize | FileCheck %s

// asym: c * s + z, one rounding per operation.
// CHECK-LABEL: func.func @asym
// CHECK-NEXT: %[[C:.*]] = arith.sitofp %arg0 : i32 to f32
// CHECK-NEXT: %[[CS:.*]] = arith.mulf %[[C]], %arg1 : f32
// CHECK-NEXT: %[[X:.*]] = arith.addf %[[CS]], %arg2 : f32
// CHECK-NEXT: return %[[X]]
func.func @asym(%code: i32, %scale: f32, %zero: f32) -> f32 {
  %x = kvq.dequantize %code, %scale, %zero : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  return %x : f32
}

// sym: (c - 2^(b-1)) * s.
// CHECK-LABEL: func.func @sym
// CHECK-NEXT: %[[OFF:.*]] = arith.constant 4 : i32
// CHECK-NEXT: %[[SIGNED:.*]] = arith.subi %arg0, %[[OFF]] : i32
// CHECK-NEXT: %[[C:.*]] = arith.sitofp %[[SIGNED]] : i32 to f32
// CHECK-NEXT: %[[X:.*]] = arith.mulf %[[C]], %arg1 : f32
// CHECK-NEXT: return %[[X]]
func.func @sym(%code: i32, %scale: f32, %zero: f32) -> f32 {
  %x = kvq.dequantize %code, %scale, %zero : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  return %x : f32
}

// hybrid: the sign bit of the stored scale selects asym (with |s|) or sym.
// CHECK-LABEL: func.func @hybrid
// CHECK: %[[OFF:.*]] = arith.constant 2 : i32
// CHECK: %[[SIGNED:.*]] = arith.subi %arg0, %[[OFF]] : i32
// CHECK: %[[CSYM:.*]] = arith.sitofp %[[SIGNED]] : i32 to f32
// CHECK: %[[SYM:.*]] = arith.mulf %[[CSYM]], %arg1 : f32
// CHECK: %[[ABS:.*]] = arith.negf %arg1 : f32
// CHECK: %[[C:.*]] = arith.sitofp %arg0 : i32 to f32
// CHECK: %[[CS:.*]] = arith.mulf %[[C]], %[[ABS]] : f32
// CHECK: %[[ASYM:.*]] = arith.addf %[[CS]], %arg2 : f32
// CHECK: %[[BITS:.*]] = arith.bitcast %arg1 : f32 to i32
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[BITS]], %[[ZERO]] : i32
// CHECK: %[[X:.*]] = arith.select %[[NEG]], %[[ASYM]], %[[SYM]] : f32
// CHECK: return %[[X]]
func.func @hybrid(%code: i32, %scale: f32, %zero: f32) -> f32 {
  %x = kvq.dequantize %code, %scale, %zero : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
  return %x : f32
}
