// The flush of a span = tokens slice and of a full-precision slice is one
// program for both targets: after kvq-lower-kernels a func.func over
// memrefs with no target-specific operation, a page's regions typed views
// of its bytes; the targets differ by the patterns of kvq-vectorize-parallel
// and kvq-distribute-parallel (parallel-forms.mlir, lower-kernels.mlir).
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=PROGRAM
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=PURE
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs | FileCheck %s --check-prefix=ENTRY

kvq.cache @fl model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <recent = 0, flush = 8> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, group = 8, span = tokens, mode = asym>
  }
  kvq.values window <recent = 0, flush = 8> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// Keys: block (unit, kv-head); the slice of the unit's page read as its
// scales and zero-points (f16 bits, 64 a page: 2 blocks of 8 tokens x 32
// channels) and its code words; a channel an iteration, its range checked
// and reduced over the block's 8 tokens, its 8 codes packed into its one
// word, the saturated count added where its parameters saturate.
// PROGRAM-LABEL: module @fl_program
// PROGRAM: func.func @fl_flush_keys_0(%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %[[PAGES:.*]]: memref<?xi8>, %[[TABLE:.*]]: memref<?xi32>, %{{.*}}: memref<?xf32>, %[[SAT:.*]]: memref<?xi32>, %[[NF:.*]]: memref<?xi32>,
// PROGRAM: gpu.block_id x
// PROGRAM: gpu.block_id y
// PROGRAM: memref.load %[[TABLE]]
// PROGRAM: memref.view %[[PAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: memref.view %[[PAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: memref.view %[[PAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi32>
// PROGRAM: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c32{{.*}}) step
// PROGRAM: scf.for %{{.*}} = %{{.*}} to %c8_i32{{.*}} iter_args
// PROGRAM: memref.load %{{.*}}[%[[C]]] : memref<32xf16, strided<[1], offset: ?>>
// PROGRAM: arith.cmpf uge
// PROGRAM-NEXT: scf.if
// PROGRAM: memref.store %{{.*}}, %[[NF]]
// PROGRAM: %[[WORDS:.*]] = vector.from_elements %{{.*}} : vector<1xi32>
// PROGRAM: vector.store %[[WORDS]], %{{.*}}[%{{.*}}] : memref<32xi32, strided<[1], offset: ?>>, vector<1xi32>
// PROGRAM: memref.store %{{.*}}, %{{.*}}[%[[C]]] : memref<32xi16, strided<[1], offset: ?>>
// PROGRAM: memref.store %{{.*}}, %{{.*}}[%[[C]]] : memref<32xi16, strided<[1], offset: ?>>
// PROGRAM: memref.atomic_rmw addi %{{.*}}, %[[SAT]]
// Values: a token a row, copied as it is into the page's row.
// PROGRAM: func.func @fl_flush_values_0(
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c8{{.*}}) step
// PROGRAM: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8> to memref<512xf16>
// PROGRAM: scf.parallel (%[[VC:.*]]) = (%{{.*}}) to (%c32{{.*}}) step
// PROGRAM: %[[X:.*]] = memref.load %{{.*}}[%[[VC]]] : memref<32xf16, strided<[1], offset: ?>>
// PROGRAM: memref.store %[[X]], %{{.*}}[%[[VC]]] : memref<32xf16, strided<[1], offset: ?>>

// PURE-LABEL: module @fl_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: gpu.thread_id

// On the host the channels are 16 lanes: the keys' flag and counter each a
// reduction and one branch for all of them; the values' rows one load and
// one store of 16 halves.
// CPU-LABEL: func.func @fl_flush_keys_0(
// CPU: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %c16{{.*}} {
// CPU: vector.reduction <or>
// CPU: vector.store %{{.*}} : memref<32xi32, strided<[1], offset: ?>>, vector<16xi32>
// CPU: vector.reduction <add>
// CPU: memref.atomic_rmw addi
// CPU-LABEL: func.func @fl_flush_values_0(
// CPU: scf.parallel
// CPU: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %c16{{.*}} {
// CPU: vector.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<16xf16>
// CPU: vector.reduction <or>
// CPU: vector.store %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<16xf16>

// A GPU block of 128 threads x 4 loads in flight runs as many units of
// the flush, one after another, as give each thread 4 tasks: 16 of the
// keys' (a unit is one block of 8 tokens, 32 groups), 2 of the values' (8
// tokens x 32 channels); program block x * 2 + u, and the host function
// says so for the manifest. A block past the flush's units moves nothing.
// ENTRY-LABEL: func.func @fl_flush_keys_0(
// ENTRY-SAME: device_units = 16
// ENTRY-LABEL: func.func @fl_flush_values_0(
// ENTRY-SAME: device_units = 2
// ENTRY-LABEL: gpu.func @fl_flush_values_0(
// ENTRY: %[[BX:.*]] = arith.index_castui %{{.*}} : i32 to index
// ENTRY: scf.for %[[U:.*]] = %c0 to %c2 step %c1 {
// ENTRY-NEXT: %[[C2:.*]] = arith.constant 2 : index
// ENTRY-NEXT: %[[TIMES:.*]] = arith.muli %[[BX]], %[[C2]] : index
// ENTRY-NEXT: %[[X:.*]] = arith.addi %[[TIMES]], %[[U]] : index
// ENTRY-NEXT: %[[UNIT:.*]] = arith.index_castui %[[X]] : index to i32
// ENTRY: %[[UNITS:.*]] = arith.divui %{{.*}}, %c8_i32{{.*}} : i32
// ENTRY-NEXT: %[[LIVE:.*]] = arith.cmpi ult, %[[UNIT]], %[[UNITS]] : i32
// ENTRY-NEXT: scf.if %[[LIVE]] {
