// The targets' forms of a kernel program's scf.parallel: vectors on the
// host (kvq-vectorize-parallel), the block's threads on the GPU
// (kvq-distribute-parallel), and the loops each leaves alone.
// RUN: kvq-opt %s --kvq-vectorize-parallel | FileCheck %s --check-prefix=HOST
// RUN: kvq-opt %s --kvq-distribute-parallel | FileCheck %s --check-prefix=DEVICE

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
    // HOST-LABEL: func.func @doubles
    // HOST: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %[[L:.*]] {
    // HOST: %[[X:.*]] = vector.load %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST: %[[Y:.*]] = arith.mulf %[[X]], %{{.*}} : vector<16xf32>
    // HOST: vector.store %[[Y]], %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST-NOT: scf.parallel
    func.func @doubles(%m: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %two = arith.constant 2.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %x = memref.load %m[%c] : memref<64xf32>
        %y = arith.mulf %x, %two : f32
        memref.store %y, %m[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }

    // A trip count no power of two above 1 divides: one lane, left alone.
    // HOST-LABEL: func.func @odd
    // HOST: scf.parallel
    func.func @odd(%m: memref<63xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c63 = arith.constant 63 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%c) = (%c0) to (%c63) step (%c1) {
        memref.store %one, %m[%c] : memref<63xf32>
        scf.reduce
      }
      return
    }

    // The induction variable as a value, not an address: left alone.
    // HOST-LABEL: func.func @index_as_value
    // HOST: scf.parallel
    func.func @index_as_value(%m: memref<64xi32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %i = arith.index_cast %c : index to i32
        memref.store %i, %m[%c] : memref<64xi32>
        scf.reduce
      }
      return
    }

    // Elements two apart are not a vector: left alone.
    // HOST-LABEL: func.func @strided
    // HOST: scf.parallel
    func.func @strided(%m: memref<64xf32, strided<[2]>>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        memref.store %one, %m[%c] : memref<64xf32, strided<[2]>>
        scf.reduce
      }
      return
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // Each iteration keeps to its element: the steps run inside each
    // thread's loop, one barrier at the end.
    // DEVICE-LABEL: gpu.func @own
    // DEVICE: %[[T:.*]] = gpu.thread_id x
    // DEVICE: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // DEVICE-NEXT: scf.for
    // DEVICE: memref.load %{{.*}}[%[[C]]]
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%[[C]]]
    // DEVICE: }
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @own(%m: memref<64xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.0 : f32
      scf.for %t = %c0 to %n step %c1 {
        scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
          %x = memref.load %m[%c] : memref<64xf32>
          %y = arith.addf %x, %one : f32
          memref.store %y, %m[%c] : memref<64xf32>
          scf.reduce
        }
      }
      gpu.return
    }

    // Every iteration writes element 0, which the next step reads: the
    // steps stay outside, a barrier after each.
    // DEVICE-LABEL: gpu.func @shared
    // DEVICE: scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // DEVICE: gpu.thread_id x
    // DEVICE: scf.for
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<64xf32>
    // DEVICE: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: }
    gpu.func @shared(%m: memref<64xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %t = %c0 to %n step %c1 {
        scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
          %x = memref.load %m[%c] : memref<64xf32>
          memref.store %x, %m[%c0] : memref<64xf32>
          scf.reduce
        }
      }
      gpu.return
    }
  }
}
