// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel | FileCheck %s

// Every flush form sets the kernel's nonFinite word (argument 6,
// docs/KernelABI.md) where a token it reads is a NaN or an infinity:
// |x| >= inf, unordered, on the raw input, before a key norm divides it.
// The CPU's span=channels form ORs the masks of a token's groups and
// tests once; the span=tokens flush (a program, its channels the host's
// lanes) tests each row of the parameters' pass, one flag store if any
// lane is bad; the GPU's scalar form tests each element.
kvq.cache @nf model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 1, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
}

// CHECK-LABEL: func.func @nf_flush_keys_0(
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK-NEXT: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-NEXT: %[[INFS:.*]] = vector.broadcast %[[INF]] : f32 to vector<16xf32>
// CHECK-NEXT: %[[ABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[X]])
// CHECK-NEXT: arith.cmpf uge, %[[ABS]], %[[INFS]] : vector<16xf32>
// CHECK: arith.divf %[[X]], %{{.*}} : vector<16xf32>
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<16xi1>
// CHECK: %[[ANY:.*]] = vector.reduction <or>, %{{.*}} : vector<16xi1> into i1
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: llvm.store %[[ONE]], %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr
// CHECK-NOT: vector.reduction <or>
// CHECK-LABEL: func.func @nf_flush_values_0(
// CHECK: %[[V:.*]] = arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK-NEXT: arith.constant 0x7F800000 : f32
// CHECK-NEXT: %[[VABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[V]])
// CHECK-NEXT: vector.broadcast
// CHECK-NEXT: %[[VBAD:.*]] = arith.cmpf uge, %[[VABS]], %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[VANY:.*]] = vector.reduction <or>, %[[VBAD]] : vector<16xi1> into i1
// CHECK-NEXT: scf.if %[[VANY]] {
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xi32>

// CHECK-LABEL: gpu.func @nf_flush_keys_0(
// CHECK-SAME: %arg6: !llvm.ptr<1>,
// CHECK: %[[G:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: %[[GABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[G]]) : (f32) -> f32
// CHECK-NEXT: %[[GBAD:.*]] = arith.cmpf uge, %[[GABS]], %{{.*}} : f32
// CHECK-NEXT: scf.if %[[GBAD]] {
// CHECK: %[[GONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[FLAG:.*]] = llvm.getelementptr %arg6[
// CHECK-NEXT: llvm.store %[[GONE]], %[[FLAG]] {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK: arith.divf %[[G]], %{{.*}} : f32
