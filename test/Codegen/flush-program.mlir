// The flush of a span = tokens, a span = channels, a rotated, a
// table-driven and a full-precision slice is one program for both targets: after kvq-lower-kernels a func.func over
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

kvq.cache @ch model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <recent = 0, flush = 2> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, group = 16, span = channels, mode = asym>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, group = 32, span = channels, mode = hybrid>
  }
}

kvq.cache @rot model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, group = 8, span = tokens, mode = asym, rotate = hadamard, rotate_seed = 7>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, group = 32, span = channels, mode = asym, rotate = hadamard>
  }
}

kvq.cache @tab model <layers = 2, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, group = 16, span = channels, mode = asym, key_norm = true,
                                   clip = dense<[[[0.5, 0.75]], [[0.625, 0.875]]]> : tensor<2x1x2xf32>,
                                   reorder = #kvq.reorder<perm = dense<[[[31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]], [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]> : tensor<2x1x32xi32>,
                                                          sizes = dense<[[[20, 12]], [[16, 16]]]> : tensor<2x1x2xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, group = 16, span = channels, mode = asym,
                                   clip = dense<[[[0.5, 0.75]], [[0.625, 0.875]]]> : tensor<2x1x2xf32>>
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

// span = channels keys: a token a row (2 a unit), its 2 groups of 16
// channels the iterations of a parallel loop; a group is a tile of 16
// channels, checked at once (its non-finite lanes then read as 0), its
// range reduced across the tile (min / max of lanes never NaN), its codes a
// vector packed into its one word (kvq.pack) at g * 1, its parameters
// stored at its place in the token's row of groups.
// PROGRAM-LABEL: module @ch_program
// PROGRAM: func.func @ch_flush_keys_0(%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %[[CSAT:.*]]: memref<?xi32>, %[[CNF:.*]]: memref<?xi32>,
// PROGRAM: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c2{{.*}}) step
// PROGRAM: memref.subview %{{.*}}[%{{.*}}] [32] [1] : memref<?xf16> to memref<32xf16, strided<[1], offset: ?>>
// PROGRAM: scf.parallel (%[[G:.*]]) = (%{{.*}}) to (%c2{{.*}}) step
// PROGRAM: %[[TILE:.*]] = vector.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<16xf16>
// PROGRAM: %[[BAD:.*]] = arith.cmpf uge, %{{.*}}, %{{.*}} : vector<16xf32>
// PROGRAM-NEXT: vector.reduction <or>, %[[BAD]]
// PROGRAM-NEXT: scf.if
// PROGRAM: memref.store %{{.*}}, %[[CNF]]
// PROGRAM: %[[CLEAN:.*]] = arith.select %[[BAD]], %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xf32>
// PROGRAM: vector.reduction <minnumf>, %[[CLEAN]] fastmath<nnan> : vector<16xf32> into f32
// PROGRAM: vector.reduction <maxnumf>, %[[CLEAN]] fastmath<nnan> : vector<16xf32> into f32
// PROGRAM: arith.divf %{{.*}}, %{{.*}} : f32
// PROGRAM: %[[CODES:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xi32>
// PROGRAM: %[[WORD:.*]] = kvq.pack %[[CODES]] {bits = 2 : i32} : vector<16xi32> -> vector<1xi32>
// PROGRAM: %[[AT:.*]] = arith.muli %[[G]], %{{.*}} : index
// PROGRAM-NEXT: vector.store %[[WORD]], %{{.*}}[%[[AT]]] : memref<2xi32, strided<[1], offset: ?>>, vector<1xi32>
// PROGRAM: memref.store %{{.*}}, %{{.*}}[%[[G]]] : memref<2xi16, strided<[1], offset: ?>>
// PROGRAM: memref.store %{{.*}}, %{{.*}}[%[[G]]] : memref<2xi16, strided<[1], offset: ?>>
// PROGRAM: memref.atomic_rmw addi %{{.*}}, %[[CSAT]]
// Hybrid values: the parameters from element by element passes in index
// order (squared errors summed in f64), the codes a tile of 32 packed into
// 3 words.
// PROGRAM: func.func @ch_flush_values_0(
// PROGRAM: scf.parallel
// PROGRAM: scf.for {{.*}} iter_args
// PROGRAM: memref.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>
// PROGRAM: scf.for {{.*}} -> (f64, f64)
// PROGRAM: vector.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<32xf16>
// PROGRAM: kvq.pack %{{.*}} {bits = 3 : i32} : vector<32xi32> -> vector<3xi32>
// PROGRAM: vector.store %{{.*}} : memref<3xi32, strided<[1], offset: ?>>, vector<3xi32>

// Rotated keys: the unit's 16 tokens in 2 chunks of a group (8 tokens x 32
// channels of f32 in block-local memory), each rotated there by
// kvq.hadamard with the keys' seed, its input region reading a token's
// channel where it is (window or input) as f32 and checking it, then
// quantized from there: the span = tokens groups read the chunk's rows.
// Rotated values: one token a unit, one row, no seed.
// PROGRAM-LABEL: module @rot_program
// PROGRAM: func.func @rot_flush_keys_0(
// PROGRAM: %[[ROWS:.*]] = memref.alloca() : memref<256xf32, #gpu.address_space<workgroup>>
// PROGRAM: scf.for %{{.*}} = %c0_i32 to %c2_i32 step %c1_i32 : i32 {
// PROGRAM: kvq.hadamard %[[ROWS]] dim 32 seed 7 input(%[[ROW:.*]], %[[C:.*]]) {
// PROGRAM: arith.index_castui %[[ROW]] : index to i32
// PROGRAM: %[[X:.*]] = memref.load %{{.*}}[%[[C]]] : memref<32xf16, strided<[1], offset: ?>>
// PROGRAM: %[[F:.*]] = arith.extf %[[X]] : f16 to f32
// PROGRAM: arith.cmpf uge
// PROGRAM: kvq.yield %[[F]] : f32
// PROGRAM: } : memref<256xf32, #gpu.address_space<workgroup>>
// PROGRAM: memref.subview %[[ROWS]]
// PROGRAM: vector.store %{{.*}} : memref<32xi32, strided<[1], offset: ?>>, vector<1xi32>
// PROGRAM: func.func @rot_flush_values_0(
// PROGRAM: %[[ROW:.*]] = memref.alloca() : memref<32xf32, #gpu.address_space<workgroup>>
// PROGRAM-NOT: scf.for
// PROGRAM: kvq.hadamard %[[ROW]] dim 32 input(
// PROGRAM: } : memref<32xf32, #gpu.address_space<workgroup>>
// PROGRAM: vector.load %{{.*}} : memref<32xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, vector<32xf32>
// PROGRAM: kvq.pack %{{.*}} {bits = 2 : i32} : vector<32xi32> -> vector<2xi32>

// Channel tables: each a constant memref.global of the program named after
// it. The reordered keys' group g: its size, first position and clip factor
// looked up by (layer row, kv-head, g), its range over its positions'
// channels (channelAt) in a loop of its size, its codes packed by a loop
// from its first word (group_word) of the token's 4. The values' groups
// (no reorder) take only their clip factors from a table.
// PROGRAM-LABEL: module @tab_program
// PROGRAM-DAG: memref.global "private" constant @tab_flush_keys_0_keys_group_size : memref<4xi32> = dense<[20, 12, 16, 16]>
// PROGRAM-DAG: memref.global "private" constant @tab_flush_keys_0_keys_group_start : memref<4xi32> = dense<[0, 20, 0, 16]>
// PROGRAM-DAG: memref.global "private" constant @tab_flush_keys_0_keys_clip : memref<4xi32> = dense<[1056964608, 1061158912, 1059061760, 1063256064]>
// PROGRAM-DAG: memref.global "private" constant @tab_flush_keys_0_keys_perm : memref<64xi32>
// PROGRAM-DAG: memref.global "private" constant @tab_flush_keys_0_keys_group_word : memref<4xi32> = dense<[0, 2, 0, 2]>
// PROGRAM: func.func @tab_flush_keys_0(
// PROGRAM: memref.subview %{{.*}}[%{{.*}}] [4] [1] : memref<64xi32> to memref<4xi32, strided<[1], offset: ?>>
// PROGRAM: scf.parallel
// PROGRAM: %[[SIZES:.*]] = memref.get_global @tab_flush_keys_0_keys_group_size : memref<4xi32>
// PROGRAM: %[[SIZE:.*]] = memref.load %[[SIZES]]
// PROGRAM: memref.get_global @tab_flush_keys_0_keys_clip : memref<4xi32>
// PROGRAM: scf.for %{{.*}} = %{{.*}} to %[[SIZE]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// PROGRAM: memref.get_global @tab_flush_keys_0_keys_perm : memref<64xi32>
// PROGRAM: memref.get_global @tab_flush_keys_0_keys_group_word : memref<4xi32>
// PROGRAM: scf.for %{{.*}} = %{{.*}} to %[[SIZE]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (i64, i32, i32)
// PROGRAM: func.func @tab_flush_values_0(
// PROGRAM: memref.get_global @tab_flush_values_0_values_clip : memref<4xi32>
// PROGRAM: kvq.pack %{{.*}} {bits = 2 : i32} : vector<16xi32> -> vector<1xi32>

// PURE-LABEL: module @fl_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: gpu.thread_id
// PURE: module @ch_host
// PURE: module @ch_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: gpu.thread_id
// PURE: module @rot_host
// PURE: module @rot_program
// PURE-NOT: nvvm.
// PURE-NOT: llvm.inline_asm
// PURE-NOT: llvm.getelementptr
// PURE-NOT: llvm.load
// PURE-NOT: llvm.store
// PURE-NOT: gpu.thread_id
// PURE: module @tab_host
// PURE: module @tab_program
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

// The span = channels keys on the host: a token's 2 groups are copies side
// by side (kvq-vectorize-parallel's tile copies; the loop over the unit's
// tokens, which look their rows up, stays): their tiles' ranges
// folded together into a vector of the 2 groups, whose parameters are
// computed at once, their codes one stream of 2 words, one store, their
// scales one store. The hybrid values' loop keeps its iterations one after
// another: their squared errors are summed element by element.
// CPU-LABEL: func.func @ch_flush_keys_0(
// CPU: scf.parallel
// CPU-NOT: scf.parallel
// CPU: vector.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<16xf16>
// CPU: vector.load %{{.*}} : memref<32xf16, strided<[1], offset: ?>>, vector<16xf16>
// CPU: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<16xf32>
// CPU: arith.divf %{{.*}}, %{{.*}} : vector<2xf32>
// CPU: kvq.pack %{{.*}} {bits = 2 : i32} : vector<32xi32> -> vector<2xi32>
// CPU: vector.store %{{.*}} : memref<2xi32, strided<[1], offset: ?>>, vector<2xi32>
// CPU: vector.store %{{.*}} : memref<2xi16, strided<[1], offset: ?>>, vector<2xi16>
// CPU: vector.reduction <add>
// CPU: memref.atomic_rmw addi
// CPU-LABEL: func.func @ch_flush_values_0(
// CPU: scf.parallel
// CPU: scf.for {{.*}} -> (f64, f64)

// The values' groups with clip factors on the host: still copies side by
// side, each copy's factor its own load of the table.
// CPU-LABEL: func.func @tab_flush_values_0(
// CPU-NOT: scf.parallel
// CPU: memref.get_global @tab_flush_values_0_values_clip : memref<4xi32>
// CPU: memref.load
// CPU: memref.load
// CPU: arith.divf %{{.*}}, %{{.*}} : vector<2xf32>
// CPU: kvq.pack %{{.*}} {bits = 2 : i32} : vector<32xi32> -> vector<2xi32>

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

// A rotated unit's block rotates it in its memory: one unit a block (no
// device_units), the memory each target's, its views in the default space.
// ENTRY-LABEL: func.func @rot_flush_keys_0(
// ENTRY-NOT: device_units
// ENTRY: kvq.hadamard %{{.*}} dim 32 seed 7 input(
// ENTRY: } : memref<256xf32>
// ENTRY-LABEL: gpu.func @rot_flush_keys_0(
// ENTRY-NOT: workgroup
// ENTRY: kvq.hadamard %{{.*}} dim 32 seed 7 input(
// ENTRY: } : memref<256xf32>

// The tables go with the program to each target's module.
// ENTRY: module @tab_host
// ENTRY-DAG: memref.global "private" constant @tab_flush_keys_0_keys_perm
// ENTRY-DAG: memref.global "private" constant @tab_flush_values_0_values_clip
// ENTRY: gpu.module @tab_kernels
// ENTRY-DAG: memref.global "private" constant @tab_flush_keys_0_keys_perm
// ENTRY-DAG: memref.global "private" constant @tab_flush_values_0_values_clip
