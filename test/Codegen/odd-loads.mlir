// kvq-vectorize-parallel, last: on the host, a load of a vector of no power
// of two of elements (a group's 3 code words) is a masked load of the next
// power of two, the lanes past it masked off (nothing past it is read), and
// its first lanes. Loads of a power of two, and the GPU's loads, stay.
// RUN: kvq-opt %s --kvq-vectorize-parallel | FileCheck %s

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
    // CHECK-LABEL: func.func @words
    // CHECK-DAG: %[[MASK:.*]] = arith.constant dense<[true, true, true, false]> : vector<4xi1>
    // CHECK-DAG: %[[ZEROS:.*]] = arith.constant dense<0> : vector<4xi32>
    // CHECK: %[[WIDE:.*]] = vector.maskedload %arg0[%arg1], %[[MASK]], %[[ZEROS]] {alignment = 4 : i64} : memref<?xi32>, vector<4xi1>, vector<4xi32> into vector<4xi32>
    // CHECK: %[[WORDS:.*]] = vector.shuffle %[[WIDE]], %[[WIDE]] [0, 1, 2] : vector<4xi32>, vector<4xi32>
    // CHECK: vector.load %arg0[%arg1] : memref<?xi32>, vector<4xi32>
    // CHECK: return %[[WORDS]]
    func.func @words(%codes: memref<?xi32>, %at: index) -> (vector<3xi32>, vector<4xi32>) {
      %words = vector.load %codes[%at] {alignment = 4 : i64} : memref<?xi32>, vector<3xi32>
      %four = vector.load %codes[%at] : memref<?xi32>, vector<4xi32>
      return %words, %four : vector<3xi32>, vector<4xi32>
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // CHECK-LABEL: func.func @gpu_words
    // CHECK-NOT: vector.maskedload
    // CHECK: vector.load %arg0[%arg1] {alignment = 4 : i64} : memref<?xi32>, vector<3xi32>
    func.func @gpu_words(%codes: memref<?xi32>, %at: index) -> vector<3xi32> {
      %words = vector.load %codes[%at] {alignment = 4 : i64} : memref<?xi32>, vector<3xi32>
      return %words : vector<3xi32>
    }
  }
}
