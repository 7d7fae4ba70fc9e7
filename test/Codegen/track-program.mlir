// The outlier-tracking kernel is one program for both targets: after
// kvq-lower-kernels it is a func.func over memrefs whose scratch is
// block-local memory (memref.alloca in the workgroup address space) and
// whose five steps per flush unit are loops the block's threads share;
// kvq-instantiate-programs gives the scratch each target's form.
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels)' | FileCheck %s --check-prefix=PROGRAM
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels)' | FileCheck %s --check-prefix=PURE
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs)' | FileCheck %s --check-prefix=ENTRY
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target{host-cpu=x86-64-v4 chips=sm_80},kvq-assign-layout,kvq-plan-kernels,kvq-select-forms,kvq-lower-kernels,kvq-instantiate-programs,kvq-distribute-parallel)' | FileCheck %s --check-prefix=THREADS

// Pools of 2 + 2 entries from layer 1, flush units of 8 tokens.
kvq.cache @ott model <layers = 2, heads = 4, kv_heads = 2, head_dim = 32, dtype = f16> page 32 pool <capacity = 2, extra = 2, first_layer = 1> {
  kvq.keys window <sink = 1, recent = 4, flush = 8> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 8>
  }
  kvq.values window <sink = 1, recent = 4, flush = 8> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// The program: the ABI's buffers as memrefs; per candidate (2 slots + 8
// tokens) a metric, a position and a verdict, per unit token a slot, the
// freed slots and two control words, all block-local.
// PROGRAM-LABEL: module @ott_program
// PROGRAM: func.func @ott_track(%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// PROGRAM-SAME: kind = "track"
// PROGRAM: %[[METRICS:.*]] = memref.alloca() : memref<10xf32, #gpu.address_space<workgroup>>
// PROGRAM: memref.alloca() : memref<10xi32, #gpu.address_space<workgroup>>
// PROGRAM: %[[KEPT:.*]] = memref.alloca() : memref<10xi32, #gpu.address_space<workgroup>>
// PROGRAM: memref.alloca() : memref<8xi32, #gpu.address_space<workgroup>>
// PROGRAM: memref.alloca() : memref<2xi32, #gpu.address_space<workgroup>>
// PROGRAM: %[[CONTROL:.*]] = memref.alloca() : memref<2xi32, #gpu.address_space<workgroup>>
// PROGRAM: gpu.block_id x
// Per flush unit: metrics of the 10 candidates (an L1 norm each, a flushed
// token's row in the ring or the input: a memref chosen by a select) ...
// PROGRAM: scf.for
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c10{{.*}})
// PROGRAM: arith.select %{{.*}}, %{{.*}}, %{{.*}} : memref<?xf16>
// PROGRAM: llvm.call_intrinsic "llvm.fabs"
// PROGRAM: memref.store %{{.*}}, %[[METRICS]]
// ... the ranks, compared with every candidate's ...
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c10{{.*}})
// PROGRAM: memref.load %[[METRICS]]
// PROGRAM: memref.store %{{.*}}, %[[KEPT]]
// ... the pool's bookkeeping on one thread ...
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{(_[0-9]+)?}})
// PROGRAM: memref.store %{{.*}}, %[[CONTROL]]
// ... entering tokens' 8 x 32 elements copied into the pools ...
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c256{{.*}})
// ... and replaced by the mean of the others, per channel of keys and values.
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c64{{.*}})
// PROGRAM: arith.divf
// PROGRAM: arith.truncf %{{.*}} : f32 to f16

// Nothing of a target, no address arithmetic, anywhere in the program
// (the last module).
// PURE-LABEL: module @ott_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: llvm.alloca
// PURE-NOT: llvm.mlir.addressof
// PURE-NOT: gpu.thread_id
// PURE-NOT: gpu.barrier

// The scratch is the host function's stack and the GPU block's shared
// memory, each a view in the default memory space.
// ENTRY-NOT: module @ott_program
// ENTRY-LABEL: module @ott_host
// ENTRY: func.func @ott_track(
// ENTRY-NOT: memref.alloca
// ENTRY: llvm.alloca %{{.*}} x i8 {alignment = 16 : i64}
// ENTRY: builtin.unrealized_conversion_cast %{{.*}} to memref<10xf32>
// ENTRY: scf.parallel
// ENTRY-LABEL: gpu.module @ott_kernels
// ENTRY: llvm.mlir.global internal @ott_track_shared0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<40 x i8>
// ENTRY: gpu.func @ott_track(
// ENTRY-NOT: memref.alloca
// ENTRY: %[[SHARED:.*]] = llvm.mlir.addressof @ott_track_shared0 : !llvm.ptr<3>
// ENTRY: llvm.addrspacecast %[[SHARED]] : !llvm.ptr<3> to !llvm.ptr
// ENTRY: builtin.unrealized_conversion_cast %{{.*}} to memref<10xf32>
// ENTRY: scf.parallel

// On the GPU each step is a loop over the block's threads and a barrier;
// the bookkeeping step is thread 0's alone.
// THREADS-LABEL: gpu.func @ott_track(
// THREADS-NOT: scf.parallel
// THREADS: scf.for %{{.*}} = %{{.*}} to %c10{{.*}} step
// THREADS: gpu.barrier
// THREADS: scf.for %{{.*}} = %{{.*}} to %c10{{.*}} step
// THREADS: gpu.barrier
// THREADS: scf.for %{{.*}} = %{{.*}} to %c1{{_[0-9]+}} step
// THREADS: gpu.barrier
// THREADS: gpu.barrier
// THREADS: gpu.barrier
// THREADS-NOT: gpu.barrier
// THREADS: gpu.return
