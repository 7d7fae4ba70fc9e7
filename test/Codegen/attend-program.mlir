// The attend kernel of full-precision caches as one program for both
// targets (AttendProgram.cpp): upstream ops only, no target's instruction
// or pointer arithmetic. Block (split, kv-head, sequence) scores its tile's
// queries against the three regions of its split (sinks, page rows through
// the block table, the window ring), each a parallel loop over tokens
// around a reduction over channels; the softmax is a maximum per head, the
// weights 2^(s - m), their sum per head; the value sums are a parallel
// loop over channels around a reduction over tokens, region by region; the
// last block to arrive (an atomic add between fences) merges the splits.
// The forms passes make it each target's: the host's vectors (channels the
// lanes of the dots and value sums, tokens those of the softmax, a page
// ahead asked for) and the GPU's threads (16-byte row loads, teams of a
// warp's threads, no page asked for). The program is the default;
// `attend-programs=false` emits the kernel for each target instead.
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=attend-programs=false | FileCheck %s --check-prefix=EMITTED
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=PROGRAM
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=CLEAN
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel | FileCheck %s --check-prefix=HOST
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-distribute-parallel | FileCheck %s --check-prefix=DEVICE

kvq.cache @c model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <sink = 2, recent = 8, flush = 4> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <sink = 2, recent = 8, flush = 4> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// EMITTED: func.func @c_attend_0(%arg0: !llvm.ptr
// EMITTED-LABEL: module @c_program
// EMITTED-NOT: @c_attend_0

// The program: block-local queries (aligned, for row loads) and scores (4
// heads per split token: the target's split capacity sizes them).
// PROGRAM-LABEL: module @c_program
// PROGRAM: func.func @c_attend_0(%[[Q:arg[0-9]+]]: memref<?xf16>, %[[PARTIAL:arg[0-9]+]]: memref<?xi8>, %[[OUT:arg[0-9]+]]: memref<?xf32>, %[[ARRIVALS:arg[0-9]+]]: memref<?xi32>, %[[SEQS:arg[0-9]+]]: memref<?xi32>, %[[KPAGES:arg[0-9]+]]: memref<?xi8>, %[[VPAGES:arg[0-9]+]]: memref<?xi8>, %[[KTABLES:arg[0-9]+]]: memref<?xi32>, %[[VTABLES:arg[0-9]+]]: memref<?xi32>, %[[KSINK:arg[0-9]+]]: memref<?xi8>, %[[VSINK:arg[0-9]+]]: memref<?xi8>, %[[KWINDOW:arg[0-9]+]]: memref<?xi8>, %[[VWINDOW:arg[0-9]+]]: memref<?xi8>,
// PROGRAM-SAME: attributes {kvq.kernel = {kind = "attend", layers = array<i64: 0>}}
// PROGRAM: %[[QUERIES:.*]] = memref.alloca() {alignment = 16 : i64} : memref<256xf32, #gpu.address_space<workgroup>>
// PROGRAM: %[[SCORES:.*]] = memref.alloca(%{{.*}}) {kvq.split_local = 4 : i64} : memref<?xf32, #gpu.address_space<workgroup>>
// PROGRAM: %[[KEYPAGES:.*]] = memref.alloca(%{{.*}}) {kvq.split_local = 1 : i64} : memref<?xi32, #gpu.address_space<workgroup>>
// PROGRAM: gpu.block_id  x
// PROGRAM: gpu.block_id  y
// PROGRAM: gpu.block_id  z
// The block-table entries of the split's key pages, into block-local memory.
// PROGRAM: %[[ENTRIES:.*]] = memref.subview %[[KTABLES]]
// PROGRAM: scf.parallel
// PROGRAM: memref.load %[[ENTRIES]]
// PROGRAM: memref.store %{{.*}}, %[[KEYPAGES]]
// The tile's queries, scaled, into block-local memory.
// PROGRAM: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%c256) step
// PROGRAM: memref.load %[[Q]]
// PROGRAM: arith.mulf %{{.*}} fastmath<reassoc,contract> : f32
// PROGRAM: memref.store %{{.*}}, %[[QUERIES]][%[[I]]]
// Sink keys: a token's row of its sink buffer, its dots with the 4 heads.
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// PROGRAM: %[[SINKROW:.*]] = memref.view %[[KSINK]]
// PROGRAM: %[[SINKKEYS:.*]] = memref.assume_alignment %[[SINKROW]], 16 : memref<64xf16>
// PROGRAM: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c64{{.*}}) step (%{{.*}}) init (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) -> (f32, f32, f32, f32) {
// PROGRAM: memref.load %[[SINKKEYS]][%[[C]]] : memref<64xf16>
// PROGRAM: memref.store %{{.*}}, %[[SCORES]]
// Page keys: the split's page, the next page's row asked for (its 2
// lines), the dots.
// PROGRAM: memref.load %[[KEYPAGES]]
// PROGRAM: memref.view %[[KPAGES]]
// PROGRAM: arith.minui
// PROGRAM: memref.load %[[KEYPAGES]]
// PROGRAM: %[[NEXT:.*]] = memref.view %[[KPAGES]]
// PROGRAM: %[[NEXTROW:.*]] = memref.assume_alignment %[[NEXT]], 16
// PROGRAM: memref.prefetch %[[NEXTROW]][%c0{{.*}}], read, locality<2>, data
// PROGRAM: memref.prefetch %[[NEXTROW]][%c32{{.*}}], read, locality<2>, data
// PROGRAM-NOT: memref.prefetch
// PROGRAM: scf.parallel
// Window keys: the ring's row.
// PROGRAM: memref.view %[[KWINDOW]]
// The softmax: each head's maximum, its weights, their sum.
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c4{{.*}}) step
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) init (%cst{{.*}}) -> f32
// PROGRAM: arith.cmpf ogt
// PROGRAM-COUNT-4: math.exp2 %{{.*}} : f32
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c4{{.*}}) step
// PROGRAM: arith.addf
// Value sums: the channels around the tokens of each region.
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c64{{.*}}) step
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) init (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) -> (f32, f32, f32, f32)
// PROGRAM: memref.view %[[VSINK]]
// PROGRAM: memref.view %[[VPAGES]]
// PROGRAM: memref.prefetch
// PROGRAM: memref.view %[[VWINDOW]]
// The outputs normalised by l, as f16, into the partial rows.
// PROGRAM: arith.truncf %{{.*}} : f32 to f16
// PROGRAM: memref.view %[[PARTIAL]]{{.*}} to memref<64xf16>
// The arrival, then the merge by the last block.
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{.*}}) step
// PROGRAM: llvm.fence acq_rel
// PROGRAM-NOT: memref.store
// PROGRAM: memref.atomic_rmw addi %{{.*}}, %[[ARRIVALS]]
// PROGRAM: scf.if
// PROGRAM: math.exp2
// PROGRAM: memref.store %{{.*}}, %{{.*}} : memref<64xf32, strided<[1], offset: ?>>

// Nothing of a target in the program.
// CLEAN-LABEL: func.func @c_attend_0(
// CLEAN-NOT: nvvm.
// CLEAN-NOT: llvm.inline_asm
// CLEAN-NOT: llvm.getelementptr
// CLEAN-NOT: llvm.call_intrinsic
// CLEAN-NOT: llvm.load
// CLEAN-NOT: llvm.store
// CLEAN: return

// The host: the dots' channels as 16 lanes, the pages' lines asked for,
// each head's maximum and weights over the tokens as lanes (whole vectors,
// then the rest), the value sums 64 channels a pass.
// HOST-LABEL: func.func @c_attend_0(
// HOST: scf.for %{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// HOST: vector.load %{{.*}} : memref<64xf16>, vector<16xf16>
// HOST: memref.prefetch
// HOST: scf.for %{{.*}} step %c16{{.*}} iter_args(%{{.*}}) -> (vector<16xf32>)
// HOST: scf.for %{{.*}} step %c1{{.*}} iter_args(%{{.*}}) -> (f32)
// HOST: math.exp2 %{{.*}} : vector<16xf32>
// HOST: scf.for %{{.*}} step %c64{{.*}} {
// HOST: scf.for {{.*}} -> (vector<64xf32>, vector<64xf32>, vector<64xf32>, vector<64xf32>)
// HOST: return

// The GPU: no line asked for, the keys 16 bytes a load, the heads' maxima
// by teams.
// DEVICE-LABEL: gpu.func @c_attend_0(
// DEVICE-NOT: memref.prefetch
// DEVICE: vector.load %{{.*}} {alignment = 16 : i64} : memref<64xf16>, vector<8xf16>
// DEVICE: gpu.shuffle  xor
// DEVICE-NOT: memref.prefetch
// DEVICE: gpu.return
