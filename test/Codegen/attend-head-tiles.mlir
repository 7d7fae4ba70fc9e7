// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=CPU

// 4096 query heads per kv-head (MQA at an extreme ratio). The attend kernel
// keeps the accumulators of one tile of 8 heads in registers and loops over
// the 512 tiles: its code and its block-local memory are those of 8 heads,
// not 4096 (scores: 8 heads x 512 split tokens x 4 bytes; queries: 8 x 64
// x 4).
kvq.cache @mqa model <layers = 1, heads = 4096, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// CHECK-DAG: llvm.mlir.global internal @mqa_attend_0_shared0() {{.*}} : !llvm.array<16384 x i8>
// CHECK-DAG: llvm.mlir.global internal @mqa_attend_0_shared1() {{.*}} : !llvm.array<2048 x i8>
// CHECK-NOT: !llvm.array<{{[0-9][0-9][0-9][0-9][0-9][0-9]+}} x i8>
// CHECK-LABEL: gpu.func @mqa_attend_0(
// CHECK: %[[TILES:.*]] = arith.constant 512 : i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[TILES]] step

// CPU-LABEL: func.func @mqa_attend_0(
// CPU: llvm.alloca {{.*}} x i8 {alignment = 16 : i64} : (i64) -> !llvm.ptr
// CPU: %[[TILES:.*]] = arith.constant 512 : i32
// CPU: scf.for %{{.*}} = %{{.*}} to %[[TILES]] step
