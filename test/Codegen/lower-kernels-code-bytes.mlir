// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels --kvq-instantiate-programs --kvq-vectorize-parallel --kvq-expand-pack | FileCheck %s

// The host's span=channels flush program packs codes (kvq.pack) through
// bytes where every 8 codes fill whole bytes and a group's stream fills its
// words (3-bit keys, groups of 32: 12 bytes a group): a token's 2 groups,
// copies side by side, pack as one stream. The codes go to bytes, adjacent
// fields merge in 16-, 32- and 64-bit lanes (a shift, two masks and an OR
// each, one vpternlog on x86), the low 3 bytes of each i64 are the stream,
// and the token's 6 words are one store. 5-bit values in groups of 16 (80
// bits in 3 words) pack each group alone, merging adjacent lanes (16 -> 8
// -> 4 fields of 20 bits) and shifting the 4 fields into the 3 words.
kvq.cache @bytes model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 1, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 5, mode = asym, span = channels, group = 16>
  }
}

// CHECK-LABEL: func.func @bytes_flush_keys_0(
// CHECK-NOT: scf.parallel
// CHECK: arith.trunci {{.*}} : vector<64xi32> to vector<64xi8>
// CHECK-NEXT: vector.bitcast {{.*}} : vector<64xi8> to vector<32xi16>
// CHECK: vector.bitcast {{.*}} : vector<{{.*}}> to vector<16xi32>
// CHECK: vector.bitcast {{.*}} : vector<{{.*}}> to vector<8xi64>
// CHECK: vector.bitcast {{.*}} : vector<8xi64> to vector<64xi8>
// CHECK-NEXT: %[[STREAM:.*]] = vector.shuffle {{.*}} [0, 1, 2, 8, 9, 10, 16, 17, 18, 24, 25, 26, 32, 33, 34, 40, 41, 42, 48, 49, 50, 56, 57, 58] : vector<64xi8>, vector<64xi8>
// CHECK-NEXT: %[[WORDS:.*]] = vector.bitcast %[[STREAM]] : vector<24xi8> to vector<6xi32>
// CHECK: vector.store %[[WORDS]], %{{.*}} : memref<6xi32, strided<[1], offset: ?>>, vector<6xi32>

// CHECK-LABEL: func.func @bytes_flush_values_0(
// CHECK-NOT: to vector<16xi8>
// CHECK: vector.bitcast {{.*}} : vector<{{.*}}> to vector<8xi64>
// CHECK: arith.trunci {{.*}} : vector<4xi64> to vector<4xi32>
// CHECK: vector.from_elements %{{.*}}, %{{.*}}, %{{.*}} : vector<3xi32>
// CHECK-COUNT-4: vector.store %{{.*}} : memref<12xi32, strided<[1], offset: ?>>, vector<3xi32>
