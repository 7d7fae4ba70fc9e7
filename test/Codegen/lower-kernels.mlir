// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-distribute-parallel | FileCheck %s --check-prefix=GPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-expand-dequantize | FileCheck %s --check-prefix=EXPANDED

kvq.cache @kivi model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// The host entry points take the launch's argument array and a block id;
// the block's threads are plain loops.
// CPU-NOT: kvq.flush_kernel
// Block-local memory is allocated once, in the entry block. The quantized
// keys are scored 16 tokens a vector, each chunk's codes unpacked from the
// channel's two words of 32 codes, stored under a mask where a block
// straddles the split; exp2 is a polynomial (rounding to an integer, no libm
// call); quantized values are summed 16 channels a vector, a token's four
// words (two groups of 32 channels) loaded at once.
// CPU-LABEL: func.func @kivi_attend_0(
// CPU-NEXT: arith.constant
// CPU-NEXT: llvm.alloca
// CPU-NOT: kvq.dequantize
// CPU: kvq.unpack %{{.*}} {bits = 2 : i32, offset = 0 : i32, stride = 2 : i32} : vector<2xi32> -> vector<16xi32>
// CPU: kvq.unpack %{{.*}} {bits = 2 : i32, offset = 32 : i32, stride = 2 : i32} : vector<2xi32> -> vector<16xi32>
// CPU: llvm.intr.masked.store {{.*}} : vector<16xf32>, vector<16xi1> into !llvm.ptr
// CPU-NOT: llvm.call_intrinsic "llvm.exp2"
// CPU: llvm.call_intrinsic "llvm.roundeven"
// CPU-NOT: llvm.call_intrinsic "llvm.exp2"
// CPU-NOT: kvq.dequantize
// CPU: kvq.unpack %{{.*}} {bits = 2 : i32, offset = 96 : i32, stride = 2 : i32} : vector<4xi32> -> vector<16xi32>
// CPU-NOT: kvq.dequantize
// The block counts itself with an acquire-release add; the last of its
// kv-head resets the counter and merges its 4 heads' splits: one item per
// head and chunk of 16 channels (4 x 4), each a loop over the splits for
// the maximum, then one for the weights (exp2 by a polynomial) and the
// splits' outputs, 16 halves a load, then one vector divide and store.
// CPU: llvm.atomicrmw add %{{.*}}, %{{.*}} acq_rel : !llvm.ptr, i32
// CPU: llvm.store %{{.*}}, %{{.*}} atomic monotonic {alignment = 4 : i64} : i32, !llvm.ptr
// CPU: scf.for %{{.*}} = %{{.*}} to %c16_i32 step %c1_i32{{.*}} : i32 {
// CPU: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32)
// CPU: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, vector<16xf32>)
// CPU: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (f32) -> f32
// CPU: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<16xf16>
// CPU: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CPU: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CPU: return
// The key flush (span=tokens) is a program, after the emitted kernels: its
// loop over a block's 64 channels becomes vectors of 16 lanes, a group a
// lane, with the quantizer's own arithmetic (true division, round to
// nearest even) lane by lane. A group's range is a running min and max by
// compare and select (one vminps / vmaxps each), not llvm.minnum /
// llvm.maxnum (x86 adds a NaN test and a blend to each). The lanes' two
// words each are interleaved into one store of 32 words.
// CPU-LABEL: func.func @kivi_flush_keys_0(%arg0: !llvm.ptr, %arg1: i32, %arg2: i32, %arg3: i32)
// CPU: scf.for %{{.*}} = %{{.*}} to %c64{{.*}} step %c16{{.*}} {
// CPU-NOT: llvm.minnum
// CPU: arith.cmpf olt, {{.*}} : vector<16xf32>
// CPU-NEXT: arith.select {{.*}} : vector<16xi1>, vector<16xf32>
// CPU-NEXT: arith.cmpf ogt, {{.*}} : vector<16xf32>
// CPU-NEXT: arith.select {{.*}} : vector<16xi1>, vector<16xf32>
// CPU-NOT: llvm.minnum
// CPU: arith.divf {{.*}} : vector<16xf32>
// CPU: arith.truncf {{.*}} : vector<16xf32> to vector<16xf16>
// CPU: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (vector<16xf32>) -> vector<16xf32>
// CPU: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, {{.*}}, 15, 31] : vector<32xi32>, vector<32xi32>
// CPU-NEXT: arith.constant 2 : index
// CPU-NEXT: %[[AT:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CPU-NEXT: vector.store %{{.*}}, %{{.*}}[%[[AT]]] : memref<128xi32, strided<[1], offset: ?>>, vector<32xi32>
// The value flush (span=channels) is a program too, a group a tile of its
// 32 channels. On the host a token's 2 groups are copies side by side: the
// tiles checked by one OR and one test, each tile halved into one register,
// the copies' ranges folded together (compare and select: the tiles'
// non-finite lanes read as 0) into one vector of the groups, from which the
// parameters are computed for both groups at once; the codes of both groups
// packed as one stream into their 4 words, one store, and the scales and
// zero-points one store each.
// CPU-LABEL: func.func @kivi_flush_values_0(%arg0: !llvm.ptr, %arg1: i32, %arg2: i32, %arg3: i32)
// CPU-NOT: scf.parallel
// CPU: vector.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>, vector<32xf16>
// CPU: vector.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>, vector<32xf16>
// CPU: %[[BAD:.*]] = arith.ori %{{.*}}, %{{.*}} : vector<32xi1>
// CPU-NEXT: %[[ANY:.*]] = vector.reduction <or>, %[[BAD]] : vector<32xi1> into i1
// CPU-NEXT: scf.if %[[ANY]] {
// CPU: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<16xf32>
// CPU: vector.shuffle %{{.*}}, %{{.*}} [0, 8] : vector<16xf32>, vector<16xf32>
// CPU: arith.divf %{{.*}}, %{{.*}} : vector<2xf32>
// CPU: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (vector<32xf32>) -> vector<32xf32>
// CPU: kvq.pack %{{.*}} {bits = 2 : i32} : vector<64xi32> -> vector<4xi32>
// CPU: vector.store %{{.*}} : memref<4xi32, strided<[1], offset: ?>>, vector<4xi32>
// CPU: vector.store %{{.*}} : memref<2xi16, strided<[1], offset: ?>>, vector<2xi16>
// CPU: vector.store %{{.*}} : memref<2xi16, strided<[1], offset: ?>>, vector<2xi16>
// CPU: return

// On the GPU the same programs spread over 128 threads with barriers,
// shared memory and warp-shuffle reductions. Every chip is sm_80+, so the
// quantized loops take their matrix forms: codes moved into f16 halves by
// prmt and lop3, multiplied by mma.sync (keys: twice, the folded queries'
// rounding and residual), the warp reconverged after the keys' stores.
// GPU: gpu.module @kivi_kernels
// GPU-DAG: llvm.mlir.global internal @kivi_attend_0_shared0() {addr_space = 3 : i32, alignment = 16 : i64}
// GPU-LABEL: gpu.func @kivi_attend_0(
// GPU: nvvm.prmt <default>
// GPU: llvm.inline_asm {{.*}}"lop3.b32 $0, $1, $2, $3, 0xEA;"
// GPU: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// GPU-NEXT: llvm.extractvalue
// GPU: nvvm.mma.sync
// GPU: nvvm.bar.warp.sync
// GPU: llvm.call_intrinsic "llvm.exp2"
// GPU: nvvm.prmt <default>
// GPU: nvvm.mma.sync
// GPU-NOT: kvq.unpack
// GPU: gpu.return
// The key flush: a group a thread, its range by compare and select.
// GPU-LABEL: gpu.func @kivi_flush_keys_0(%arg0: !llvm.ptr<1> {llvm.noalias, llvm.readonly}, %arg1: !llvm.ptr<1> {llvm.noalias, llvm.readonly}, %arg2: !llvm.ptr<1>,
// GPU-SAME: kernel
// GPU: gpu.thread_id x
// GPU: arith.cmpf olt, {{.*}} : f32
// GPU-NEXT: arith.select {{.*}} : f32
// GPU: arith.divf {{.*}} : f32
// GPU: vector.store {{.*}} : memref<128xi32, strided<[1], offset: ?>>, vector<2xi32>
// GPU: gpu.barrier
// GPU: gpu.return
// The value flush: a group a thread, the same tiles in its registers.
// GPU-LABEL: gpu.func @kivi_flush_values_0(
// GPU: gpu.thread_id x
// GPU: vector.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>, vector<32xf16>
// GPU: kvq.pack %{{.*}} {bits = 2 : i32} : vector<32xi32> -> vector<2xi32>
// GPU: gpu.return

// EXPANDED-NOT: kvq.dequantize
