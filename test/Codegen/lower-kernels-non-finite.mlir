// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel | FileCheck %s

// Every flush sets the kernel's nonFinite word (argument 6,
// docs/KernelABI.md) where a token it reads is a NaN or an infinity:
// |x| >= inf, unordered, on the raw input, before a key norm divides it;
// the lanes found so then read as 0 for the group's range. The
// span=channels program tests a group's tile at once; on the host a
// token's 2 groups are copies side by side whose masks are ORed and tested
// once, on the GPU a thread tests its own tile (its registers). The
// span=tokens program (its channels the host's lanes) tests each row of the
// parameters' pass, one flag store if any lane is bad.
kvq.cache @nf model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 1, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
}

// CHECK-LABEL: func.func @nf_flush_keys_0(
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>
// CHECK-NEXT: %[[Y:.*]] = arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>
// CHECK-NEXT: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-NEXT: %[[INFS:.*]] = vector.broadcast %[[INF]] : f32 to vector<32xf32>
// CHECK-NEXT: %[[ABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[X]])
// CHECK-NEXT: %[[YABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[Y]])
// CHECK-NEXT: %[[BAD:.*]] = arith.cmpf uge, %[[ABS]], %[[INFS]] : vector<32xf32>
// CHECK-NEXT: %[[YBAD:.*]] = arith.cmpf uge, %[[YABS]], %[[INFS]] : vector<32xf32>
// CHECK-NEXT: %[[EITHER:.*]] = arith.ori %[[BAD]], %[[YBAD]] : vector<32xi1>
// CHECK-NEXT: %[[ANY:.*]] = vector.reduction <or>, %[[EITHER]] : vector<32xi1> into i1
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: memref.store %[[ONE]], %{{.*}}[%{{.*}}] : memref<?xi32>
// CHECK: %[[CLEAN:.*]] = arith.select %[[BAD]], %{{.*}}, %[[X]] : vector<32xi1>, vector<32xf32>
// CHECK: arith.divf %[[CLEAN]], %{{.*}} : vector<32xf32>
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
// CHECK: %[[G:.*]] = arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>
// CHECK: %[[GABS:.*]] = llvm.call_intrinsic "llvm.fabs"(%[[G]]) : (vector<32xf32>) -> vector<32xf32>
// CHECK-NEXT: %[[GBAD:.*]] = arith.cmpf uge, %[[GABS]], %{{.*}} : vector<32xf32>
// CHECK-NEXT: %[[GANY:.*]] = vector.reduction <or>, %[[GBAD]] : vector<32xi1> into i1
// CHECK-NEXT: scf.if %[[GANY]] {
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xi32>
// CHECK: %[[GCLEAN:.*]] = arith.select %[[GBAD]], %{{.*}}, %[[G]] : vector<32xi1>, vector<32xf32>
// CHECK: arith.divf %[[GCLEAN]], %{{.*}} : vector<32xf32>
