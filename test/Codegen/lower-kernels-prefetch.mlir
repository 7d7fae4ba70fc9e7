// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=attend-programs=false | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=attend-programs=false | FileCheck %s --check-prefix=GPU
// The fp16 kernels are the emitted ones (`attend-programs=false`); the
// attend program asks for the next page's row the same way
// (attend-program.mlir, HOST).

// The CPU's attend kernel streams the next page's slice in while it reads
// one (its hardware prefetchers stop at 4 KiB pages; slices are 32 KiB
// apart at random): token i of a page asks for lines 4i .. 4i + 3 of the
// next page's slice (256 bytes a token), into L2 (hint 2); the block table
// entry after the last page of the range is never read (the last page
// prefetches itself). The GPU's fp16 kernels keep loads in flight instead
// and ask for nothing; its matrix forms ask for their split's quantized
// pages on entry (@kivi, below).
kvq.cache @fp model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

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

// KIVI-2, on the GPU, before its first phase: where the launch asks
// (prefetchSplit, the last argument: the grid runs in waves) the attend
// block asks for the 64-byte lines of its split's quantized keys, then
// values, in one loop over the block's threads that nobody waits for
// (prefetch.global.L2, one per line). A page's slice of either is 96
// lines: codes (512 groups of 8 bytes: lines 0-63), scales from byte 4096
// and zero-points from 5120 (2 bytes a group: lines 64-79 and 80-95). A
// line is asked for where it meets the bytes of the split's groups of the
// page, [8 n0, 8 n1) for codes. The CPU has no matrix forms and asks for
// no split.
//
// The CPU folds every key block's queries (foldBlockQueries) before it
// scores a token, a pass that reads only parameters, 512 bytes a block, a
// page apart: block b first asks for the scales and zero-points of block
// b + 4 (page 128 / group 32, the same block of the next page; the range's
// last block asks for itself), 4 lines each, into L2.
kvq.cache @kivi model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// CPU-LABEL: func.func @kivi_attend_0(
// CPU-NOT: prefetch.global.L2
// CPU-NOT: llvm.intr.prefetch
// CPU: %[[BLOCKS:.*]]:4 = scf.if %{{.*}} -> (f32, f32, f32, f32) {
// CPU: %[[LASTB:.*]] = arith.subi %[[COUNT:.*]], %c1_i32
// CPU: %[[AHEAD:.*]] = arith.addi %[[B:.*]], %c4_i32{{.*}} : i32
// CPU: arith.minui %[[AHEAD]], %[[LASTB]] : i32
// CPU: %[[SCALES:.*]] = arith.addi %c4096_i64, %[[N:.*]] : i64
// CPU: %[[S0:.*]] = llvm.getelementptr %[[SLICE:.*]][%[[SCALES]]]
// CPU: "llvm.intr.prefetch"(%[[S0]]) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}>
// CPU-COUNT-3: "llvm.intr.prefetch"
// CPU: %[[ZEROS:.*]] = arith.addi %c5120_i64, %{{.*}} : i64
// CPU: %[[Z0:.*]] = llvm.getelementptr %[[SLICE]][%[[ZEROS]]]
// CPU: "llvm.intr.prefetch"(%[[Z0]])
// CPU-COUNT-3: "llvm.intr.prefetch"
// CPU-NOT: "llvm.intr.prefetch"
// CPU: scf.for
// CPU-NOT: "llvm.intr.prefetch"
// CPU: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr -> vector<16xf16>
// CPU: return

// GPU-LABEL: gpu.func @kivi_attend_0(
// GPU-SAME: %[[PREFETCH:arg[0-9]+]]: i32, %{{arg[0-9]+}}: i32) kernel
// GPU: %[[KEYS:.*]] = arith.muli %{{.*}}, %c96_i32 : i32
// GPU: %[[VALUES:.*]] = arith.muli %{{.*}}, %c96_i32{{.*}} : i32
// GPU: %[[BOTH:.*]] = arith.addi %[[KEYS]], %[[VALUES]] : i32
// GPU: %[[OFF:.*]] = arith.cmpi eq, %[[PREFETCH]], %c0_i32
// GPU: %[[COUNT:.*]] = arith.select %[[OFF]], %c0_i32{{.*}}, %[[BOTH]] : i32
// GPU: scf.for %[[I:.*]] = %{{.*}} to %[[COUNT]] step %c128_i32{{.*}} : i32 {
// GPU: %[[IS_KEY:.*]] = arith.cmpi ult, %[[I]], %[[KEYS]] : i32
// GPU: scf.if %[[IS_KEY]] {
// GPU: %[[LINE:.*]] = arith.remui %[[I]], %c96_i32{{.*}} : i32
// GPU: %[[G0:.*]] = arith.muli %{{.*}}, %c512_i32
// GPU: %[[N0:.*]] = arith.divui %[[G0]], %c128_i32
// GPU: %[[G1:.*]] = arith.muli %{{.*}}, %c512_i32
// GPU: %[[N1:.*]] = arith.divui %[[G1]], %c128_i32
// GPU: %[[SLICE:.*]] = llvm.getelementptr %arg5[
// GPU: %[[IN_CODES:.*]] = arith.cmpi ult, %[[LINE]], %c64_i32
// GPU: %[[FIRST1:.*]] = arith.select %[[IN_CODES]], %c0_i32{{.*}}, %c64_i32{{.*}} : i32
// GPU: %[[BYTES1:.*]] = arith.select %[[IN_CODES]], %c8_i32{{.*}}, %c2_i32{{.*}} : i32
// GPU: %[[OFF1:.*]] = arith.select %[[IN_CODES]], %c0_i64, %c4096_i64 : i64
// GPU: %[[IN_SCALES:.*]] = arith.cmpi ult, %[[LINE]], %c80_i32
// GPU: %[[FIRST:.*]] = arith.select %[[IN_SCALES]], %[[FIRST1]], %c80_i32{{.*}} : i32
// GPU: %[[BYTES:.*]] = arith.select %[[IN_SCALES]], %[[BYTES1]], %c2_i32{{.*}} : i32
// GPU: %[[OFF:.*]] = arith.select %[[IN_SCALES]], %[[OFF1]], %c5120_i64 : i64
// GPU: %[[BASE:.*]] = arith.select %[[IN_SCALES]], %{{.*}}, %[[SLICE]] : !llvm.ptr<1>
// GPU: %[[L:.*]] = arith.subi %[[LINE]], %[[FIRST]] : i32
// GPU: %[[START:.*]] = arith.muli %[[L]], %c64_i32
// GPU: %[[END:.*]] = arith.addi %[[START]], %c64_i32
// GPU: %[[LO:.*]] = arith.muli %[[N0]], %[[BYTES]] : i32
// GPU: arith.cmpi ult, %[[LO]], %[[END]]
// GPU: %[[HI:.*]] = arith.muli %[[N1]], %[[BYTES]] : i32
// GPU: arith.cmpi ult, %[[START]], %[[HI]]
// GPU: scf.if
// GPU: %[[WIDE:.*]] = arith.extui %[[START]] : i32 to i64
// GPU: %[[AT:.*]] = arith.addi %[[OFF]], %[[WIDE]] : i64
// GPU: %[[ADDR:.*]] = llvm.getelementptr %[[BASE]][%[[AT]]]
// GPU: llvm.inline_asm has_side_effects asm_dialect = att "prefetch.global.L2 [$0];", "l" %[[ADDR]]
// GPU: %[[J:.*]] = arith.subi %[[I]], %[[KEYS]] : i32
// GPU: %[[IS_VALUE:.*]] = arith.cmpi ult, %[[J]], %[[VALUES]] : i32
// GPU: scf.if %[[IS_VALUE]] {
// GPU: llvm.getelementptr %arg6[
// GPU: "prefetch.global.L2 [$0];"
// GPU-NOT: gpu.barrier
// GPU: scf.for
// GPU-NOT: prefetch.global.L2
// GPU: nvvm.mma.sync
