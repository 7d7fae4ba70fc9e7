// RUN: kvq-opt %s --kvq-expand-unpack | FileCheck %s

// Codes inside one word: a permute of the words to the lanes, a per-lane
// logical shift, a mask.
// CHECK-LABEL: func.func @consecutive
// CHECK-DAG: %[[SH:.*]] = arith.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]> : vector<16xi32>
// CHECK-DAG: %[[LO:.*]] = vector.shuffle %arg0, %arg0 [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] : vector<2xi32>, vector<2xi32>
// CHECK: %[[CODE:.*]] = arith.shrui %[[LO]], %[[SH]] : vector<16xi32>
// CHECK: %[[THREE:.*]] = arith.constant 3 : i32
// CHECK: %[[MASK:.*]] = vector.broadcast %[[THREE]] : i32 to vector<16xi32>
// CHECK: arith.andi %[[CODE]], %[[MASK]] : vector<16xi32>
func.func @consecutive(%words: vector<2xi32>) -> vector<16xi32> {
  %codes = kvq.unpack %words {bits = 2 : i32, offset = 0 : i32, stride = 2 : i32} : vector<2xi32> -> vector<16xi32>
  return %codes : vector<16xi32>
}

// 3-bit codes straddle words (code 10 holds bits 30..32): a funnel shift of
// each lane's word and its successor.
// CHECK-LABEL: func.func @straddling
// CHECK-DAG: %[[SH:.*]] = arith.constant dense<[0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 1, 4, 7, 10, 13]> : vector<16xi32>
// CHECK-DAG: %[[LO:.*]] = vector.shuffle %arg0, %arg0 [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1] : vector<3xi32>, vector<3xi32>
// CHECK-DAG: %[[HI:.*]] = vector.shuffle %arg0, %arg0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2] : vector<3xi32>, vector<3xi32>
// CHECK: llvm.call_intrinsic "llvm.fshr"(%[[HI]], %[[LO]], %[[SH]])
func.func @straddling(%words: vector<3xi32>) -> vector<16xi32> {
  %codes = kvq.unpack %words {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<16xi32>
  return %codes : vector<16xi32>
}

// The same token of 4 consecutive channels' groups (3 words each): a
// stride of 96 bits between lanes.
// CHECK-LABEL: func.func @strided
// CHECK-DAG: %[[SH:.*]] = arith.constant dense<2> : vector<4xi32>
// CHECK-DAG: %[[LO:.*]] = vector.shuffle %arg0, %arg0 [1, 4, 7, 10] : vector<12xi32>, vector<12xi32>
// CHECK: arith.shrui %[[LO]], %[[SH]]
func.func @strided(%words: vector<12xi32>) -> vector<4xi32> {
  %codes = kvq.unpack %words {bits = 3 : i32, offset = 34 : i32, stride = 96 : i32} : vector<12xi32> -> vector<4xi32>
  return %codes : vector<4xi32>
}
