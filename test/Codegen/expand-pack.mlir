// kvq-expand-pack: each kvq.pack in the forms of its module's target. On
// the host (SIMD registers), whole words of whole bytes go through bytes
// and any other stream merges adjacent lanes; on the GPU, and where no
// kvq.target is known, each code is shifted into its word.
// RUN: kvq-opt %s --kvq-expand-pack | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  module @c_host attributes {kvq.cache = @c} {
    // 16 2-bit codes, one word: every code to a byte, fields merged in 16-,
    // 32- and 64-bit lanes, then bytes 0-1 and 8-9 (the low 2 bytes of each
    // i64) are the stream.
    // CHECK-LABEL: func.func @bytes
    // CHECK-NOT: kvq.pack
    // CHECK: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
    // CHECK: vector.bitcast %{{.*}} : vector<16xi8> to vector<8xi16>
    // CHECK: vector.bitcast %{{.*}} : vector<{{.*}}> to vector<4xi32>
    // CHECK: vector.bitcast %{{.*}} : vector<{{.*}}> to vector<2xi64>
    // CHECK: vector.shuffle %{{.*}} [0, 1, 8, 9] : vector<16xi8>, vector<16xi8>
    // CHECK: vector.bitcast %{{.*}} : vector<4xi8> to vector<1xi32>
    func.func @bytes(%codes: vector<16xi32>) -> vector<1xi32> {
      %words = kvq.pack %codes {bits = 2 : i32} : vector<16xi32> -> vector<1xi32>
      return %words : vector<1xi32>
    }

    // 4 8-bit codes are not a multiple of 8: adjacent lanes merged while
    // two fields fit a lane (4 -> 2 -> 1), the one field left is the word.
    // CHECK-LABEL: func.func @merged
    // CHECK-NOT: kvq.pack
    // CHECK: vector.bitcast %{{.*}} : vector<4xi32> to vector<2xi64>
    // CHECK: arith.trunci %{{.*}} : vector<2xi64> to vector<2xi32>
    // CHECK: vector.bitcast %{{.*}} : vector<2xi32> to vector<1xi64>
    // CHECK: arith.trunci %{{.*}} : vector<1xi64> to vector<1xi32>
    // CHECK: vector.from_elements %{{.*}} : vector<1xi32>
    func.func @merged(%codes: vector<4xi32>) -> vector<1xi32> {
      %words = kvq.pack %codes {bits = 8 : i32} : vector<4xi32> -> vector<1xi32>
      return %words : vector<1xi32>
    }

    // 12 3-bit codes, 36 bits: merged 12 -> 6 -> 3 lanes of 12-bit fields
    // at bits 0, 12 and 24; the last straddles into word 1.
    // CHECK-LABEL: func.func @partial
    // CHECK-NOT: kvq.pack
    // CHECK: vector.bitcast %{{.*}} : vector<12xi32> to vector<6xi64>
    // CHECK: vector.from_elements %{{.*}}, %{{.*}} : vector<2xi32>
    func.func @partial(%codes: vector<12xi32>) -> vector<2xi32> {
      %words = kvq.pack %codes {bits = 3 : i32} : vector<12xi32> -> vector<2xi32>
      return %words : vector<2xi32>
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // A thread's registers: code k shifted to bit 3k of its word; code 10
    // (bits 30-32) straddles, its high bit shifted down into word 1.
    // CHECK-LABEL: gpu.func @shifts
    // CHECK-NOT: kvq.pack
    // CHECK-NOT: vector.bitcast
    // CHECK-DAG: %[[C30:.*]] = arith.constant 30 : i32
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
    // CHECK-DAG: %[[X10:.*]] = vector.extract %arg0[10] : i32 from vector<16xi32>
    // CHECK-DAG: arith.shli %[[X10]], %[[C30]] : i32
    // CHECK-DAG: arith.shrui %[[X10]], %[[C2]] : i32
    // CHECK: vector.from_elements %{{.*}}, %{{.*}} : vector<2xi32>
    gpu.func @shifts(%codes: vector<16xi32>, %out: memref<2xi32>) kernel {
      %words = kvq.pack %codes {bits = 3 : i32} : vector<16xi32> -> vector<2xi32>
      %c0 = arith.constant 0 : index
      vector.store %words, %out[%c0] : memref<2xi32>, vector<2xi32>
      gpu.return
    }
  }

  // No cache, no target: the portable form.
  // CHECK-LABEL: func.func @portable
  // CHECK-NOT: kvq.pack
  // CHECK-NOT: vector.bitcast
  // CHECK: vector.from_elements
  func.func @portable(%codes: vector<8xi32>) -> vector<1xi32> {
    %words = kvq.pack %codes {bits = 4 : i32} : vector<8xi32> -> vector<1xi32>
    return %words : vector<1xi32>
  }
}
