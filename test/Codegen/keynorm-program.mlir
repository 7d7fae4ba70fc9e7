// The key-norm kernel is one program for both targets: after
// kvq-lower-kernels it is a func.func over memrefs with no target-specific
// operation; kvq-instantiate-programs gives it each target's entry, and the
// targets differ only by the patterns of kvq-vectorize-parallel (CPU) and
// kvq-distribute-parallel (GPU).
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels)' | FileCheck %s --check-prefix=PROGRAM
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels)' | FileCheck %s --check-prefix=PURE
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs)' | FileCheck %s --check-prefix=ENTRY
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs,kvq-vectorize-parallel)' | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs,kvq-distribute-parallel)' | FileCheck %s --check-prefix=GPU
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs,kvq-vectorize-parallel,kvq-distribute-parallel,kvq-pipeline-loads)' | FileCheck %s --check-prefix=PIPELINED

kvq.cache @kn model <layers = 1, heads = 4, kv_heads = 2, head_dim = 32, dtype = f16> page 16 {
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// The program: buffers are memrefs viewed a row at a time (2 kv-heads x 32
// channels), the block is gpu.block_id, the block's shared work is
// scf.parallel over a row's channels.
// PROGRAM-LABEL: module @kn_program
// PROGRAM: func.func @kn_keynorm(%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// PROGRAM: gpu.block_id x
// Phase 0: the block's row of maxima starts at zero; the chunk's tokens
// stream by, one row each.
// PROGRAM: %[[MAXIMA:.*]] = memref.subview %{{.*}}[%{{.*}}] [64] [1]
// PROGRAM: scf.parallel
// PROGRAM: memref.store %{{.*}}, %[[MAXIMA]]
// PROGRAM: scf.for
// PROGRAM: %[[KEYS:.*]] = memref.subview %{{.*}}[%{{.*}}] [64] [1] : memref<?xf16>
// PROGRAM: scf.parallel
// PROGRAM: memref.load %[[KEYS]]
// PROGRAM: arith.maxsi
// PROGRAM: memref.store %{{.*}}, %[[MAXIMA]]
// Phase 1: each channel's largest chunk maximum, as a norm.
// PROGRAM: } else {
// PROGRAM: scf.parallel
// PROGRAM: scf.for {{.*}} iter_args
// PROGRAM: arith.cmpf ogt
// PROGRAM: llvm.call_intrinsic "llvm.sqrt"
// Nothing of a target, no address arithmetic, anywhere in the program
// (the last module).
// PURE-LABEL: module @kn_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: llvm.x86
// PURE-NOT: gpu.thread_id
// PURE-NOT: gpu.barrier

// Each target's entry: the host's reads its arguments from the launch's
// array, the GPU's takes them as parameters; a memref is a view of its
// pointer.
// ENTRY-NOT: module @kn_program
// ENTRY-LABEL: module @kn_host
// ENTRY: func.func @kn_keynorm(%{{.*}}: !llvm.ptr, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// ENTRY: builtin.unrealized_conversion_cast %{{.*}} to memref<?xf16>
// ENTRY: scf.parallel
// ENTRY-LABEL: gpu.module @kn_kernels
// ENTRY: gpu.func @kn_keynorm(%{{.*}}: !llvm.ptr<1> {llvm.noalias, llvm.readonly}
// ENTRY: scf.parallel

// On the host, 16-lane vectors over a row; phase 1's chunk loop carries
// them.
// CPU-LABEL: module @kn_host
// CPU: func.func @kn_keynorm(
// CPU-NOT: scf.parallel
// CPU: vector.store %{{.*}} : memref<64xf32, strided<[1], offset: ?>>, vector<16xf32>
// CPU: vector.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>, vector<16xf16>
// CPU: arith.maxsi %{{.*}} : vector<16xi32>
// CPU: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<16xf32>)
// CPU: llvm.call_intrinsic "llvm.sqrt"(%{{.*}}) : (vector<16xf32>) -> vector<16xf32>
// CPU-LABEL: gpu.module @kn_kernels
// CPU: scf.parallel

// On the GPU, a thread per channel, which takes its channel through all the
// chunk's tokens (the token loop inside the thread loop: no barrier per
// token); a barrier after each loop of the block's threads.
// GPU-LABEL: module @kn_host
// GPU: scf.parallel
// GPU-LABEL: gpu.module @kn_kernels
// GPU-NOT: scf.parallel
// GPU: gpu.func @kn_keynorm(
// GPU: %[[T0:.*]] = gpu.thread_id x
// GPU: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// GPU: memref.store
// GPU: gpu.barrier
// GPU: gpu.thread_id x
// GPU: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// GPU-NEXT: scf.for
// GPU-NOT: gpu.barrier
// GPU: memref.load %{{.*}}[%[[C]]] : memref<64xf16
// GPU: gpu.barrier
// GPU: } else {

// Pipelined, each GPU thread keeps the keys of 8 tokens in flight: the
// token loop, unrolled by 8, carries them, and the tokens past the last
// whole 8 run in a second loop; the host's vector loop is as it was.
// PIPELINED-LABEL: module @kn_host
// PIPELINED-NOT: iter_args({{.*}}) -> (vector<16xf16>
// PIPELINED-LABEL: gpu.module @kn_kernels
// PIPELINED: gpu.func @kn_keynorm(
// PIPELINED: %[[MAIN:.*]]:8 = scf.for {{.*}} iter_args({{.*}}) -> (f16, f16, f16, f16, f16, f16, f16, f16)
// PIPELINED: scf.for {{.*}} iter_args({{.*}} = %[[MAIN]]#0, {{.*}}) -> (f16, f16, f16, f16, f16, f16, f16, f16)
