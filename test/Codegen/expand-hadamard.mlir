// kvq-expand-hadamard: each kvq.hadamard in the form of its module's target
// (docs/Numerics.md, "Hadamard rotation"). On the host (a block of one
// thread, 16 lanes) a row at a time in vectors: the signs one XOR with a
// constant vector, the stages below 16 a shuffle each, the stage of 16 whole
// vectors. On the GPU a parallel loop over the rows' butterflies a stage,
// each sign computed from the seed's bits. Where no kvq.target is known, the
// butterflies a loop a stage. An input region is read where the rotation
// first reads each element: on the host a row at a time into a row of its
// own at the function's start (a parallel loop over its channels,
// kvq-vectorize-parallel's to make the lanes'), then the rows written once,
// rotated; on the GPU by the first stage's butterflies themselves.
// RUN: kvq-opt %s --split-input-file --kvq-expand-hadamard --canonicalize | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, vector_lanes = 16>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  // Channels 0-2 negated, 3 not: bits of splitmix64's first output from 7
  // (0x63cbe1e4'59320dd7).
  // CHECK-LABEL: func.func @forward
  // CHECK-DAG: %[[SCALE:.*]] = arith.constant dense<0.176776692> : vector<16xf32>
  // CHECK-DAG: %[[SIGNS:.*]] = arith.constant dense<[-2147483648, -2147483648, -2147483648, 0,
  // CHECK: scf.for %{{.*}} = %c0_i32 to %c2_i32 step %c1_i32 : i32 {
  // CHECK: %[[X:.*]] = vector.load %{{.*}} : memref<64xf32>, vector<16xf32>
  // CHECK: %[[BITS:.*]] = arith.bitcast %[[X]] : vector<16xf32> to vector<16xi32>
  // CHECK: arith.xori %[[BITS]], %[[SIGNS]] : vector<16xi32>
  // CHECK: vector.load %{{.*}} : memref<64xf32>, vector<16xf32>
  // CHECK: vector.shuffle {{.*}} [1, 0, 3, 2,
  // CHECK: vector.shuffle {{.*}} [2, 3, 0, 1,
  // CHECK: vector.shuffle {{.*}} [4, 5, 6, 7, 0,
  // CHECK: vector.shuffle {{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 0,
  // CHECK: %[[Y:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : vector<16xf32>
  // CHECK: vector.store %[[Y]]
  // CHECK: %[[Z:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : vector<16xf32>
  // CHECK: vector.store %[[Z]]
  // CHECK-NOT: kvq.hadamard
  module @c_host attributes {kvq.cache = @c} {
    func.func @forward(%rows: memref<64xf32>) {
      kvq.hadamard %rows dim 32 seed 7 : memref<64xf32>
      return
    }

    // CHECK-LABEL: func.func @host_input
    // CHECK: %[[ROWBUF:.*]] = memref.alloca() : memref<32xf32>
    // CHECK: scf.for %[[ROW:.*]] = %c0_i32 to %c2_i32 step %c1_i32 : i32 {
    // CHECK: %[[R:.*]] = arith.index_castui %[[ROW]] : i32 to index
    // CHECK: scf.parallel (%[[C:.*]]) = (%c0) to (%c32) step (%c1) {
    // CHECK: %[[X:.*]] = memref.load %{{.*}}[%[[R]], %[[C]]] : memref<2x32xf16>
    // CHECK: %[[F:.*]] = arith.extf %[[X]] : f16 to f32
    // CHECK: memref.store %[[F]], %[[ROWBUF]][%[[C]]]
    // CHECK: vector.load %[[ROWBUF]][%c0] : memref<32xf32>, vector<16xf32>
    // CHECK: vector.load %[[ROWBUF]][%c16] : memref<32xf32>, vector<16xf32>
    // CHECK: vector.shuffle {{.*}} [1, 0, 3, 2,
    // CHECK-COUNT-2: vector.store %{{.*}}, %arg0[%{{.*}}] : memref<64xf32>, vector<16xf32>
    // CHECK-NOT: vector.store
    // CHECK: }
    // CHECK-NOT: kvq.hadamard
    func.func @host_input(%rows: memref<64xf32>, %tokens: memref<2x32xf16>) {
      kvq.hadamard %rows dim 32 input(%row, %c) {
        %x = memref.load %tokens[%row, %c] : memref<2x32xf16>
        %f = arith.extf %x : f16 to f32
        kvq.yield %f : f32
      } : memref<64xf32>
      return
    }
  }

  // Inverse: the butterflies of the 2 rows (32 a stage) in 5 parallel
  // loops, the scale then the signs after the last: bit c of 0x59320dd7
  // moved to the sign bit.
  // CHECK-LABEL: gpu.func @inverse
  // CHECK-COUNT-4: scf.parallel (%{{.*}}) = (%c0) to (%c32) step (%c1) {
  // CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c32) step (%c1) {
  // CHECK: %[[SUM:.*]] = arith.addf
  // CHECK: %[[SCALED:.*]] = arith.mulf %[[SUM]], %{{.*}} : f32
  // CHECK: %[[SHIFT:.*]] = arith.subi %c31_i32
  // CHECK: arith.shli %c1496452567_i32, %[[SHIFT]] : i32
  // CHECK: %[[BITS:.*]] = arith.bitcast %[[SCALED]] : f32 to i32
  // CHECK: arith.xori %[[BITS]]
  // CHECK: memref.store
  // CHECK-NOT: kvq.hadamard
  gpu.module @c_kernels attributes {kvq.cache = @c} {
    gpu.func @inverse(%rows: memref<64xf32>) kernel {
      kvq.hadamard %rows dim 32 seed 7 inverse : memref<64xf32>
      gpu.return
    }

    // The first stage reads each butterfly's two elements from the input.
    // CHECK-LABEL: gpu.func @gpu_input
    // CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c32) step (%c1) {
    // CHECK: %[[A:.*]] = memref.load %{{.*}} : memref<2x32xf16>
    // CHECK: %[[FA:.*]] = arith.extf %[[A]] : f16 to f32
    // CHECK: %[[B:.*]] = memref.load %{{.*}} : memref<2x32xf16>
    // CHECK: %[[FB:.*]] = arith.extf %[[B]] : f16 to f32
    // CHECK: arith.addf %[[FA]], %[[FB]] : f32
    // CHECK-NOT: kvq.hadamard
    gpu.func @gpu_input(%rows: memref<64xf32>, %tokens: memref<2x32xf16>) kernel {
      kvq.hadamard %rows dim 32 input(%row, %c) {
        %x = memref.load %tokens[%row, %c] : memref<2x32xf16>
        %f = arith.extf %x : f16 to f32
        kvq.yield %f : f32
      } : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// No seed: no signs; 2 stages of 2 butterflies, the scale 1/2 in the last.
// CHECK-LABEL: func.func @targetless
// CHECK-NOT: arith.xori
// CHECK: scf.for %{{.*}} = %c0_i32 to %c2_i32 step %c1_i32 : i32 {
// CHECK: scf.for %{{.*}} = %c0_i32 to %c2_i32 step %c1_i32 : i32 {
// CHECK: arith.mulf %{{.*}}, %cst : f32
// CHECK-NOT: kvq.hadamard
func.func @targetless(%rows: memref<4xf32>) {
  kvq.hadamard %rows dim 4 : memref<4xf32>
  return
}
