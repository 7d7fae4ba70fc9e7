// kvq-running-extrema: on a target whose min/max skipping a NaN are one
// instruction (the GPU), a loop-carried running minimum or maximum written
// as compare and select, starting at a constant that is no NaN, becomes
// llvm.minnum / llvm.maxnum; the host's (vminps already) and any other
// select are left alone.
// RUN: kvq-opt %s --kvq-running-extrema | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  // CHECK-LABEL: module @c_host
  // CHECK: func.func @host_range
  // CHECK-NOT: llvm.minnum
  // CHECK: arith.select
  // CHECK: return
  module @c_host attributes {kvq.cache = @c} {
    func.func @host_range(%m: memref<64xf32>) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %inf = arith.constant 0x7F800000 : f32
      %r = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %inf) -> (f32) {
        %x = memref.load %m[%i] : memref<64xf32>
        %lt = arith.cmpf olt, %x, %acc : f32
        %next = arith.select %lt, %x, %acc : f32
        scf.yield %next : f32
      }
      return %r : f32
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // CHECK-LABEL: gpu.func @range
    // CHECK: scf.for {{.*}} iter_args(%[[MIN:.*]] = %{{.*}}, %[[MAX:.*]] = %{{.*}}, %[[NAN:.*]] = %{{.*}}, %[[OTHER:.*]] = %{{.*}})
    // CHECK: %[[X:.*]] = memref.load
    // CHECK: %[[LO:.*]] = llvm.call_intrinsic "llvm.minnum"(%[[MIN]], %[[X]]) : (f32, f32) -> f32
    // CHECK: %[[HI:.*]] = llvm.call_intrinsic "llvm.maxnum"(%[[MAX]], %[[X]]) : (f32, f32) -> f32
    // A NaN start would be kept by the select and skipped by minnum; a
    // select keeping the other operand is no running extremum.
    // CHECK: %[[N:.*]] = arith.select %{{.*}}, %[[X]], %[[NAN]] : f32
    // CHECK: %[[O:.*]] = arith.select %{{.*}}, %[[OTHER]], %[[X]] : f32
    // CHECK: scf.yield %[[LO]], %[[HI]], %[[N]], %[[O]]
    gpu.func @range(%m: memref<64xf32>, %out: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %inf = arith.constant 0x7F800000 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %nan = arith.constant 0x7FC00000 : f32
      %r:4 = scf.for %i = %c0 to %c64 step %c1 iter_args(%lo = %inf, %hi = %ninf, %n = %nan, %o = %inf) -> (f32, f32, f32, f32) {
        %x = memref.load %m[%i] : memref<64xf32>
        %lt = arith.cmpf olt, %x, %lo : f32
        %lo2 = arith.select %lt, %x, %lo : f32
        %gt = arith.cmpf ogt, %x, %hi : f32
        %hi2 = arith.select %gt, %x, %hi : f32
        %ltn = arith.cmpf olt, %x, %n : f32
        %n2 = arith.select %ltn, %x, %n : f32
        %lto = arith.cmpf olt, %x, %o : f32
        %o2 = arith.select %lto, %o, %x : f32
        scf.yield %lo2, %hi2, %n2, %o2 : f32, f32, f32, f32
      }
      memref.store %r#0, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
}
