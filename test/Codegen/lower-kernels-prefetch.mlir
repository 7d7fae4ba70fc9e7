// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-lower-kernels | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-lower-kernels | FileCheck %s --check-prefix=GPU

// Full-precision pages: the CPU's attend kernel asks for the page rows
// 2 KiB ahead of those it reads (its hardware prefetchers stop at 4 KiB
// pages, every 16 rows of 256 bytes here), each 64-byte line of a key row
// and of a value row's chunk; the GPU kernels hide latency with warps and
// ask for nothing.
kvq.cache @fp model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// CPU-LABEL: func.func @fp_flush_values_0(
// CPU-NOT: llvm.intr.prefetch
// CPU-LABEL: func.func @fp_attend_0(
// CPU: %[[AT:.*]] = arith.addi %{{.*}}, %c2048_i64{{.*}} : i64
// CPU: %[[LINE:.*]] = llvm.getelementptr %{{.*}}[%[[AT]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CPU: "llvm.intr.prefetch"(%[[LINE]]) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
// CPU-COUNT-3: "llvm.intr.prefetch"
// CPU-LABEL: func.func @fp_combine(
// CPU-NOT: llvm.intr.prefetch

// GPU-LABEL: gpu.func @fp_attend_0(
// GPU-NOT: llvm.intr.prefetch
// GPU-LABEL: gpu.func @fp_combine(
