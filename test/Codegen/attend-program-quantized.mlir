// The attend kernel of a quantized cache as the same program as a
// full-precision cache's (AttendProgram.cpp, with
// `quantized-attend-programs`): a page row's element is `kvq.dequantize` of
// its code, read from a view of the slice's code words (3-bit codes that
// may straddle two words: the next word too, one i64 shift), and its
// group's scale (and zero-point) from views of the slice's parameter
// arrays, as stored (f16 bits); the key norms are folded into a second
// copy of the queries, which the quantized keys meet and the sinks do not.
// No target's instruction, pointer or inline assembly. Without the option
// the kernel is emitted for each target (the default).
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
// The queries, scaled, and times the kv-head's key norms.
// PROGRAM: %[[NORMROW:.*]] = memref.subview %[[NORMS]]
// PROGRAM: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%c256) step
// PROGRAM: memref.store %[[SCALED:.*]], %[[QUERIES]][%[[I]]]
// PROGRAM: %[[CH:.*]] = arith.remui %[[I]], %c64
// PROGRAM: %[[NORM:.*]] = memref.load %[[NORMROW]][%[[CH]]]
// PROGRAM: %[[NQ:.*]] = arith.mulf %[[SCALED]], %[[NORM]]
// PROGRAM: memref.store %[[NQ]], %[[NORMQ]][%[[I]]]
// Sink keys: full-precision rows, against the plain queries.
// PROGRAM: memref.subview %[[QUERIES]][%{{.*}}] [64] [1]
// PROGRAM: memref.view %[[KSINK]]
// Page keys: a token's slice of its page, its 6 x 32 code words and its
// scales as f16 bits; against the normed queries.
// PROGRAM: %[[NQROW:.*]] = memref.subview %[[NORMQ]][%{{.*}}] [64] [1]
// PROGRAM: %[[KCODES:.*]] = memref.view %[[KPAGES]][%{{.*}}][] : memref<?xi8> to memref<192xi32>
// PROGRAM: %[[KSCALES:.*]] = memref.view %[[KPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// A page ahead: the next page's slice lines shared among its tokens.
// PROGRAM: memref.prefetch %[[KPAGES]]
// PROGRAM: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c64{{.*}}) step (%{{.*}}) init
// PROGRAM: %[[W0:.*]] = memref.load %[[KCODES]]
// PROGRAM: %[[W1:.*]] = memref.load %[[KCODES]]
// PROGRAM: arith.shli
// PROGRAM: arith.ori
// PROGRAM: arith.shrui %{{.*}} : i64
// PROGRAM: %[[CODE:.*]] = arith.andi %{{.*}}, %c7_i32 : i32
// PROGRAM: %[[SBITS:.*]] = memref.load %[[KSCALES]]
// PROGRAM: %[[SF16:.*]] = arith.bitcast %[[SBITS]] : i16 to f16
// PROGRAM: %[[SCALE:.*]] = arith.extf %[[SF16]] : f16 to f32
// PROGRAM: %[[K:.*]] = kvq.dequantize %[[CODE]], %[[SCALE]], %{{.*}} : <bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
// PROGRAM: memref.load %[[NQROW]][%[[C]]]
// PROGRAM: arith.mulf %{{.*}}, %[[K]]
// Page values: channels around a sum over tokens, each element its code
// (2-bit, one word), scale and zero-point.
// PROGRAM: %[[VCODES:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<128xi32>
// PROGRAM: %[[VSCALES:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: %[[VZEROS:.*]] = memref.view %[[VPAGES]][%{{.*}}][] : memref<?xi8> to memref<64xi16>
// PROGRAM: memref.load %[[VCODES]]
// PROGRAM: memref.load %[[VSCALES]]
// PROGRAM: memref.load %[[VZEROS]]
// PROGRAM: kvq.dequantize %{{.*}}, %{{.*}}, %{{.*}} : <bits = 2, mode = asym, span = tokens, group = 32>

// CLEAN-LABEL: func.func @c_attend_0(
// CLEAN-NOT: nvvm.
// CLEAN-NOT: llvm.inline_asm
// CLEAN-NOT: llvm.getelementptr
// CLEAN-NOT: llvm.call_intrinsic
// CLEAN-NOT: llvm.load
// CLEAN-NOT: llvm.store
// CLEAN: return
