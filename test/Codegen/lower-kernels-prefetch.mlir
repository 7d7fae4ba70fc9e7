// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-lower-kernels | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-lower-kernels | FileCheck %s --check-prefix=GPU

// The CPU's attend kernel streams the next page's slice in while it reads
// one (its hardware prefetchers stop at 4 KiB pages; slices are 32 KiB
// apart at random): token i of a page asks for lines 4i .. 4i + 3 of the
// next page's slice (256 bytes a token), into L2 (hint 2); the block table
// entry after the last page of the range is never read (the last page
// prefetches itself). The GPU kernels hide latency with warps and ask for
// nothing.
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
// CPU: %[[LAST:.*]] = arith.subi %{{.*}}, %c1_i32{{.*}} : i32
// CPU: %[[NEXTPAGE:.*]] = arith.minui %{{.*}}, %[[LAST]] : i32
// CPU: scf.for %[[TOKEN:.*]] = 
// CPU: %[[IN_PAGE:.*]] = arith.subi %[[TOKEN]], %{{.*}} : i32
// CPU: %[[WIDE:.*]] = arith.extui %[[IN_PAGE]] : i32 to i64
// CPU: %[[AT:.*]] = arith.muli %[[WIDE]], %c256_i64{{.*}} : i64
// CPU: %[[LINE:.*]] = llvm.getelementptr %{{.*}}[%[[AT]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CPU: "llvm.intr.prefetch"(%[[LINE]]) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
// CPU-COUNT-3: "llvm.intr.prefetch"

// GPU-LABEL: gpu.func @fp_attend_0(
// GPU-NOT: llvm.intr.prefetch
// GPU: gpu.return
