// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s

// Where the target has cpu_dot (AVX-512 VNNI), the CPU scores span=tokens
// keys on 16-bit integers (docs/Numerics.md, "Attention on 16-bit
// integers"): per block and head, the folded queries' largest magnitude
// (a `nnan` reduction: its lanes are magnitudes of finite products, so LLVM
// reduces by a shuffle tree, not a chain of NaN-checked scalar maxima) sets
// a scale, the queries are rounded to i16 (round to nearest even);
// per channel pair, each lane gathers a token's two codes from the two
// channels' streams (one byte shuffle, one shift per lane, one mask of
// both 2-bit fields), and one vpdpwssd per head adds both products; the
// sums return to f32 times the block's scale. Span=channels values
// likewise: per 32-token block, head and group the weights p * slope are
// rounded to i16 (a token pair's p read by one masked load, so that tokens
// outside the range weigh 0), both tokens' code rows come in one 64-byte
// load (16 bytes apart: one register for the byte shuffle), each lane
// gathers one channel's pair of codes, one vpdpwssd per head and chunk;
// the block's sums are added to valueSums times its scales.
kvq.cache @dots model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// CHECK-LABEL: func.func @dots_attend_0(
// CHECK: vector.reduction <maxnumf>, %{{.*}} fastmath<nnan> : vector<16xf32> into f32
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (vector<16xf32>) -> vector<16xf32>
// CHECK-NEXT: arith.fptosi {{.*}} : vector<16xf32> to vector<16xi32>
// CHECK-NEXT: arith.trunci {{.*}} : vector<16xi32> to vector<16xi16>
// CHECK: llvm.load {{.*}} : !llvm.ptr -> vector<16xi8>
// CHECK: vector.shuffle {{.*}} [0, 1, 8, 9, 0, 1, 8, 9, 0, 1, 8, 9, 0, 1, 8, 9, 1, 2, 9, 10,
// CHECK-NEXT: vector.bitcast {{.*}} : vector<64xi8> to vector<16xi32>
// CHECK: %[[MASK:.*]] = arith.constant 196611 : i32
// CHECK: arith.constant dense<[0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6]> : vector<16xi32>
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: arith.sitofp {{.*}} : vector<16xi32> to vector<16xf32>
// CHECK-NEXT: arith.mulf
// CHECK: llvm.intr.masked.load {{.*}} : (!llvm.ptr, vector<2xi1>, vector<2xf32>) -> vector<2xf32>
// CHECK: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (vector<4xf32>) -> vector<4xf32>
// CHECK-NEXT: arith.fptosi
// CHECK-NEXT: arith.trunci {{.*}} : vector<4xi32> to vector<4xi16>
// CHECK: llvm.load {{.*}} : !llvm.ptr -> vector<64xi8>
// CHECK: vector.shuffle {{.*}} [0, 1, 16, 17, 0, 1, 16, 17, 0, 1, 16, 17, 0, 1, 16, 17, 1, 2, 17, 18, {{.*}} : vector<64xi8>, vector<64xi8>
// CHECK-NEXT: vector.bitcast {{.*}} : vector<64xi8> to vector<16xi32>
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: arith.sitofp {{.*}} : vector<16xi32> to vector<16xf32>

// Span=channels keys: each head's normalised query is rounded to i16 once,
// in the order of the vectors (here 2 groups of 32 channels; each vector
// holds 16 channels of both groups, a lane a pair of adjacent channels,
// lane l in group l % 2); per token one 64-byte load of its 24 bytes of
// codes (the slice's parameters follow), per vector one byte shuffle, one
// shift per i16 half (3-bit codes at different offsets within their bytes)
// and one mask, one vpdpwssd per head. Then the four heads' i32 lanes are
// summed per head and group (two folds across vectors, one within), go to
// f32 once, times the group's slope and the head's query scale plus the
// group's offset term, and the two groups are summed: a head's score in
// lanes 0, 4, 8 and 12. Tokens go in batches of four: their heads' lanes
// gathered by a tree of shuffles into one row a head, stored as one
// vector<4xf32> a head; the page's last tokens one by one (an extract and
// a store a head).
kvq.cache @channel_keys model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 1, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}

// CHECK-LABEL: func.func @channel_keys_attend_0(
// CHECK-COUNT-4: vector.reduction <maxnumf>, %{{.*}} fastmath<nnan> : vector<64xf32> into f32
// CHECK: llvm.load {{.*}} : !llvm.ptr -> vector<64xi8>
// CHECK: vector.shuffle {{.*}} [0, 1, 0, 1, 12, 13, 12, 13, 0, 1, 1, 2, 12, 13, 13, 14, 1, 2, 1, 2, 13, 14, 13, 14,
// CHECK-NEXT: vector.bitcast {{.*}} : vector<64xi8> to vector<32xi16>
// CHECK: arith.constant dense<7> : vector<32xi16>
// CHECK: arith.constant dense<[0, 3, 0, 3, 6, 1, 6, 1, 4, 7, 4, 7, 2, 5, 2, 5, 0, 3, 0, 3, 6, 1, 6, 1, 4, 7, 4, 7, 2, 5, 2, 5]> : vector<32xi16>
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: vector.shuffle {{.*}} [6, 7, 6, 7, 18, 19, 18, 19, 6, 7, 7, 8,
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: vector.shuffle {{.*}} [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1] : vector<2xf32>, vector<2xf32>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
// CHECK: arith.addi {{.*}} : vector<16xi32>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
// CHECK: arith.addi {{.*}} : vector<16xi32>
// CHECK-NEXT: vector.shuffle {{.*}} [2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15] : vector<16xi32>, vector<16xi32>
// CHECK-NEXT: arith.addi {{.*}} : vector<16xi32>
// CHECK: arith.sitofp {{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: vector.shuffle {{.*}} [1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: arith.addf
// CHECK-COUNT-3: vector.shuffle {{.*}} [1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: arith.addf
// CHECK-NEXT: vector.shuffle {{.*}} [0, 16, 4, 20, 8, 24, 12, 28] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: vector.shuffle {{.*}} [0, 16, 4, 20, 8, 24, 12, 28] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: vector.shuffle {{.*}} [0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK-COUNT-4: llvm.store {{.*}} : vector<4xf32>, !llvm.ptr
// CHECK: vector.shuffle {{.*}} [1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: arith.addf
// CHECK-NEXT: vector.extract {{.*}}[0] : f32 from vector<16xf32>
// CHECK-NEXT: vector.extract {{.*}}[4] : f32 from vector<16xf32>
// CHECK-NEXT: vector.extract {{.*}}[8] : f32 from vector<16xf32>
// CHECK-NEXT: vector.extract {{.*}}[12] : f32 from vector<16xf32>
// The span=tokens values' block weights: p of 16 tokens by one masked load
// (tokens outside the split are 0), not a loop of scalar loads and selects;
// then rounded to i16 per block and head against their largest. Per token
// quad and half of the chunk's 16 streams of 12 bytes, lane (j, s) gathers
// stream j's codes of pair s (bits 3k + 6s and 3k + 6s + 3), so that the
// bytes of a vector lie in two 64-byte registers; each head's weights of
// the quad's two pairs alternate across the lanes (one 64-bit load), one
// vpdpwssd per head and half. After the block each stream's two lanes are
// added.
// CHECK: llvm.intr.masked.load {{.*}} : (!llvm.ptr, vector<16xi1>, vector<16xf32>) -> vector<16xf32>
// CHECK: llvm.intr.masked.load {{.*}} : (!llvm.ptr, vector<16xi1>, vector<16xf32>) -> vector<16xf32>
// CHECK: vector.reduction <maxnumf>, %{{.*}} fastmath<nnan> : vector<16xf32> into f32
// CHECK: llvm.call_intrinsic "llvm.roundeven"({{.*}}) : (vector<16xf32>) -> vector<16xf32>
// CHECK: arith.trunci {{.*}} : vector<16xi32> to vector<16xi16>
// CHECK: vector.bitcast {{.*}} : vector<48xi32> to vector<192xi8>
// CHECK-COUNT-4: vector.shuffle {{.*}} [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1] : vector<2xi32>, vector<2xi32>
// CHECK: vector.shuffle {{.*}} [0, 1, 0, 1, 0, 1, 1, 2, 12, 13, 12, 13, 12, 13, 13, 14, 24, 25,
// CHECK: arith.constant dense<[0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1, 0, 3, 6, 1]> : vector<32xi16>
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: vector.shuffle {{.*}} [96, 97, 96, 97, 96, 97, 97, 98, 108, 109,
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
// CHECK: vector.shuffle {{.*}} [1, 2, 1, 2, 2, 3, 2, 3, 13, 14, 13, 14,
// CHECK: arith.constant dense<[4, 7, 2, 5, 4, 7, 2, 5,
// CHECK: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<16xi32>, vector<16xi32>
// CHECK-NEXT: vector.shuffle {{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31] : vector<16xi32>, vector<16xi32>
// CHECK-NEXT: %[[CHANNELS:.*]] = arith.addi {{.*}} : vector<16xi32>
// CHECK: arith.sitofp %[[CHANNELS]] : vector<16xi32> to vector<16xf32>
// CHECK-LABEL: gpu.module @channel_keys_kernels

// The same cache on a target without them keeps the f32 form.
kvq.cache @floats model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// CHECK-LABEL: func.func @floats_attend_0(
// CHECK-NOT: vpdpwssd
// CHECK-LABEL: gpu.module
