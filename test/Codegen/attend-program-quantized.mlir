// The attend kernel of a quantized cache as the same program as a
// full-precision cache's (AttendProgram.cpp, with
// `quantized-attend-programs`). A span=channels page key whose groups fill
// whole words (3-bit codes, groups of 32: 3 words) is scored a group at a
// time: its words one vector load from a view of the slice's code words,
// one `kvq.unpack` of its 32 codes, its dot with each head's query tile
// (one `kvq.group_dot`; loads with the alignment the program knows: 16
// bytes for the query tiles, the words' own for the codes), its scale and
// sym offset folded in once with the head's query sum over the group; the
// key norms are folded
// into a second copy of the queries, which the page keys meet and the
// sinks do not. Span=tokens page values are summed a group at a time too
// (a group's 32 codes against its 32 tokens' weights), the tokens of a
// split's partial groups at its ends an element at a time:
// `kvq.dequantize` of its code (loadCodeAt) and its group's scale and
// zero-point, from views of the slice's arrays as stored (f16 bits). No
// target's instruction, pointer or inline assembly. Without the option the
// kernel is emitted for each target (the default).
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=EMITTED
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=quantized-attend-programs | FileCheck %s --check-prefix=PROGRAM
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=quantized-attend-programs | FileCheck %s --check-prefix=CLEAN

kvq.cache @c model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 32 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
  kvq.keys window <sink = 2, recent = 8, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 8, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
}

// EMITTED: func.func @c_attend_0(%arg0: !llvm.ptr
// EMITTED-LABEL: module @c_program
// EMITTED-NOT: @c_attend_0

// PROGRAM-LABEL: module @c_program
// PROGRAM: func.func @c_attend_0(%[[Q:arg[0-9]+]]: memref<?xf16>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %[[KPAGES:arg[0-9]+]]: memref<?xi8>, %[[VPAGES:arg[0-9]+]]: memref<?xi8>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %[[KSINK:arg[0-9]+]]: memref<?xi8>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?xi8>, %[[NORMS:arg[0-9]+]]: memref<?xf32>,
// PROGRAM: %[[QUERIES:.*]] = memref.alloca() {alignment = 16 : i64} : memref<256xf32, #gpu.address_space<workgroup>>
// PROGRAM: %[[NORMQ:.*]] = memref.alloca() {alignment = 16 : i64} : memref<256xf32, #gpu.address_space<workgroup>>
// The scores (4 heads a split token, aligned: the value groups read tiles
// of them), the heads' statistics (m, l), their query sums over the key
// groups and their weight sums over the value groups (4 heads a split
// token: at most one group a token).
// PROGRAM: %[[SCORES:.*]] = memref.alloca(%{{.*}}) {alignment = 16 : i64, kvq.split_local = 4 : i64}
// PROGRAM: memref.alloca() : memref<8xf32, #gpu.address_space<workgroup>>
// PROGRAM: %[[GROUPSUMS:.*]] = memref.alloca() : memref<8xf32, #gpu.address_space<workgroup>>
// PROGRAM: %[[WEIGHTSUMS:.*]] = memref.alloca(%{{.*}}) {kvq.split_local = 4 : i64}
// The queries, scaled, and times the kv-head's key norms.
// PROGRAM: %[[NORMROW:.*]] = memref.subview %[[NORMS]]
// PROGRAM: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%c256) step
// PROGRAM: memref.store %[[SCALED:.*]], %[[QUERIES]][%[[I]]]
// PROGRAM: %[[CH:.*]] = arith.remui %[[I]], %c64
// PROGRAM: %[[NORM:.*]] = memref.load %[[NORMROW]][%[[CH]]]
// PROGRAM: %[[NQ:.*]] = arith.mulf %[[SCALED]], %[[NORM]]
// PROGRAM: memref.store %[[NQ]], %[[NORMQ]][%[[I]]]
// Each head's query sum over each key group of 32.
// PROGRAM: scf.parallel (%[[G:.*]]) = (%{{.*}}) to (%c8) step
// PROGRAM: vector.load %[[NORMQ]][%{{.*}}] {alignment = 16 : i64} : memref<256xf32, #gpu.address_space<workgroup>>, vector<32xf32>
// PROGRAM: vector.reduction <add>
// PROGRAM: memref.store %{{.*}}, %[[GROUPSUMS]][%[[G]]]
// Sink keys: full-precision rows, against the plain queries.
// PROGRAM: memref.subview %[[QUERIES]][%{{.*}}] [64] [1]
// PROGRAM: memref.view %[[KSINK]]
// Page keys: a token's slice of its page, its 6 x 32 code words and its
// scales as f16 bits; its 2 groups' dots with the normed queries.
// PROGRAM: %[[NQROW:.*]] = memref.subview %[[NORMQ]][%{{.*}}] [64] [1]
// PROGRAM: %[[KCODES:.*]] = memref.view %[[KPAGES]][%{{.*}}][] : memref<?xi8> to memref<192xi32>
// PROGRAM: %[[KSCALES:.*]] = memref.view %[[KPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// A page ahead: the next page's slice lines shared among its tokens.
// PROGRAM: memref.prefetch %[[KPAGES]]
// PROGRAM: scf.parallel (%[[KG:.*]]) = (%{{.*}}) to (%c2{{.*}}) step (%{{.*}}) init
// PROGRAM: %[[WORDS:.*]] = vector.load %[[KCODES]][%{{.*}}] {alignment = 4 : i64} : memref<192xi32>, vector<3xi32>
// PROGRAM: %[[SBITS:.*]] = memref.load %[[KSCALES]]
// PROGRAM: %[[SF16:.*]] = arith.bitcast %[[SBITS]] : i16 to f16
// PROGRAM: %[[SCALE:.*]] = arith.extf %[[SF16]] : f16 to f32
// PROGRAM: %[[CODES:.*]] = kvq.unpack %[[WORDS]] {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
// The sym offset, -2^(3-1), times the scale; the slope is the scale.
// PROGRAM: %[[OFFSET:.*]] = arith.mulf %cst{{.*}}, %[[SCALE]]
// PROGRAM: %[[QTILE:.*]] = vector.load %[[NQROW]][%{{.*}}] {alignment = 16 : i64} : {{.*}}, vector<32xf32>
// PROGRAM: %[[QSUM:.*]] = memref.load %[[GROUPSUMS]]
// PROGRAM: %[[DOTS:.*]]:4 = kvq.group_dot %[[CODES]] slope %[[SCALE]] offset %[[OFFSET]] tiles(%[[QTILE]], %{{.*}}, %{{.*}}, %{{.*}}) sums(%[[QSUM]], %{{.*}}, %{{.*}}, %{{.*}}) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
// PROGRAM: scf.reduce(%[[DOTS]]#0, %[[DOTS]]#1, %[[DOTS]]#2, %[[DOTS]]#3 : f32, f32, f32, f32)
// Page values: each head's weight sum over each whole group of the
// split's page rows; then per channel the page rows before the first whole
// group an element at a time (2-bit codes, one word: kvq.dequantize of its
// code, scale and zero-point), the whole groups a group at a time (its 2
// words one kvq.unpack of 32 codes, their dot with each head's weights,
// the scale and zero-point folded in with the weight sum), the rows after
// the last whole group an element at a time.
// PROGRAM: scf.parallel (%[[J:.*]]) = (%{{.*}}) to (%{{.*}}) step
// PROGRAM: %[[W:.*]] = vector.load %[[SCORES]][%{{.*}}] {alignment = 16 : i64} : memref<?xf32, #gpu.address_space<workgroup>>, vector<32xf32>
// PROGRAM: %[[WSUM:.*]] = vector.reduction <add>, %[[W]]
// PROGRAM: memref.store %[[WSUM]], %[[WEIGHTSUMS]]
// A 2-bit code lies in one word: shifted out of it as a 32-bit integer.
// PROGRAM: %[[VSHIFTED:.*]] = arith.shrui %{{.*}}, %{{.*}} : i32
// PROGRAM: arith.andi %[[VSHIFTED]], %c3{{.*}} : i32
// PROGRAM: kvq.dequantize %{{.*}}, %{{.*}}, %{{.*}} : <bits = 2, mode = asym, span = tokens, group = 32>
// PROGRAM: %[[VCODES:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<128xi32>
// PROGRAM: %[[VSCALES:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: %[[VZEROS:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: %[[VWORDS:.*]] = vector.load %[[VCODES]][%{{.*}}] {alignment = 8 : i64} : memref<128xi32>, vector<2xi32>
// PROGRAM: memref.load %[[VSCALES]]
// PROGRAM: memref.load %[[VZEROS]]
// PROGRAM: %[[VCODE:.*]] = kvq.unpack %[[VWORDS]] {bits = 2 : i32, offset = 0 : i32, stride = 2 : i32} : vector<2xi32> -> vector<32xi32>
// PROGRAM: %[[WTILE:.*]] = vector.load %[[SCORES]][%{{.*}}] {alignment = 16 : i64} : memref<?xf32, #gpu.address_space<workgroup>>, vector<32xf32>
// PROGRAM: %[[WSUM0:.*]] = memref.load %[[WEIGHTSUMS]]
// PROGRAM: kvq.group_dot %[[VCODE]] slope %{{.*}} offset %{{.*}} tiles(%[[WTILE]], %{{.*}}, %{{.*}}, %{{.*}}) sums(%[[WSUM0]], %{{.*}}, %{{.*}}, %{{.*}})
// PROGRAM: kvq.dequantize %{{.*}}, %{{.*}}, %{{.*}} : <bits = 2, mode = asym, span = tokens, group = 32>

// CLEAN-LABEL: func.func @c_attend_0(
// CLEAN-NOT: nvvm.
// CLEAN-NOT: llvm.inline_asm
// CLEAN-NOT: llvm.getelementptr
// CLEAN-NOT: llvm.call_intrinsic
// CLEAN-NOT: llvm.load
// CLEAN-NOT: llvm.store
// CLEAN: return
