// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s

// The CPU's span=channels flush packs a token's codes through bytes where
// every 8 codes of a group fill whole bytes and a group's stream fills its
// words (3-bit keys, groups of 32: 12 bytes a group): the codes go to
// bytes, adjacent fields merge in 16-, 32- and 64-bit lanes (a shift, two
// masks and an OR each, one vpternlog on x86), the low 3 bytes of each i64
// are the stream, and the token's 24 bytes are one store. 5-bit values in
// groups of 16 (80 bits in 3 words) keep the pairwise lane merges and a
// store per word.
kvq.cache @bytes model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 5, mode = asym, span = channels, group = 16>
  }
}

// CHECK-LABEL: func.func @bytes_flush_keys_0(
// CHECK-COUNT-4: arith.trunci {{.*}} : vector<16xi32> to vector<16xi8>
// CHECK: vector.bitcast {{.*}} : vector<64xi8> to vector<32xi16>
// CHECK-NEXT: %[[S16:.*]] = arith.constant dense<5> : vector<32xi16>
// CHECK-NEXT: arith.shrui %{{.*}}, %[[S16]] : vector<32xi16>
// CHECK-NEXT: arith.constant dense<56> : vector<32xi16>
// CHECK: arith.constant dense<7> : vector<32xi16>
// CHECK: vector.bitcast {{.*}} : vector<64xi8> to vector<16xi32>
// CHECK-NEXT: %[[S32:.*]] = arith.constant dense<10> : vector<16xi32>
// CHECK-NEXT: arith.shrui %{{.*}}, %[[S32]] : vector<16xi32>
// CHECK-NEXT: arith.constant dense<4032> : vector<16xi32>
// CHECK: arith.constant dense<63> : vector<16xi32>
// CHECK: vector.bitcast {{.*}} : vector<64xi8> to vector<8xi64>
// CHECK-NEXT: %[[S64:.*]] = arith.constant dense<20> : vector<8xi64>
// CHECK-NEXT: arith.shrui %{{.*}}, %[[S64]] : vector<8xi64>
// CHECK-NEXT: arith.constant dense<16773120> : vector<8xi64>
// CHECK: arith.constant dense<4095> : vector<8xi64>
// CHECK: %[[STREAM:.*]] = vector.shuffle {{.*}} [0, 1, 2, 8, 9, 10, 16, 17, 18, 24, 25, 26, 32, 33, 34, 40, 41, 42, 48, 49, 50, 56, 57, 58] : vector<64xi8>, vector<64xi8>
// CHECK: llvm.store %[[STREAM]], %{{.*}} {alignment = 4 : i64} : vector<24xi8>, !llvm.ptr

// CHECK-LABEL: func.func @bytes_flush_values_0(
// CHECK-NOT: to vector<16xi8>
// CHECK: arith.shrui %{{.*}}, %{{.*}} : vector<8xi64>
// CHECK: arith.trunci {{.*}} : vector<8xi64> to vector<8xi32>
// CHECK-COUNT-3: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr
// CHECK-LABEL: func.func @bytes_attend_0(
