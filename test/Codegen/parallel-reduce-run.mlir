// A kernel program's parallel reductions on the GPU, run: each thread's
// share, gpu.all_reduce across the block (warp shuffles, then the warps'
// results through shared memory), then the initial value. 300 elements
// over 128 threads: threads own 2 or 3 of them, and the block's 4 warps
// all take part.
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: kvq-ptx-run %t.ptx --kernel reduce --block 128 \
// RUN:   --buf-iota x=f32:300 --buf-zero out=12 \
// RUN:   --arg ptr:x --arg ptr:x --arg u64:0 --arg u64:300 --arg u64:1 \
// RUN:   --arg ptr:out --arg ptr:out --arg u64:0 --arg u64:3 --arg u64:1 \
// RUN:   --arg u64:300 --print out:f32 | FileCheck %s

// 0.5 + (0 + 1 + ... + 299); the largest of 299 and -1; the smallest of
// 0 and 7.
// CHECK:      out[0] = 44850.5
// CHECK-NEXT: out[1] = 299
// CHECK-NEXT: out[2] = 0

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    gpu.func @reduce(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %half = arith.constant 0.5 : f32
      %minus = arith.constant -1.0 : f32
      %seven = arith.constant 7.0 : f32
      %r:3 = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%half, %minus, %seven) -> (f32, f32, f32) {
        %v = memref.load %x[%i] : memref<?xf32>
        scf.reduce(%v, %v, %v : f32, f32, f32) {
        ^bb0(%a: f32, %b: f32):
          %s = arith.addf %a, %b : f32
          scf.reduce.return %s : f32
        }, {
        ^bb0(%a: f32, %b: f32):
          %gt = arith.cmpf ogt, %a, %b : f32
          %m = arith.select %gt, %a, %b : f32
          scf.reduce.return %m : f32
        }, {
        ^bb0(%a: f32, %b: f32):
          %lt = arith.cmpf olt, %a, %b : f32
          %m = arith.select %lt, %a, %b : f32
          scf.reduce.return %m : f32
        }
      }
      memref.store %r#0, %out[%c0] : memref<?xf32>
      memref.store %r#1, %out[%c1] : memref<?xf32>
      memref.store %r#2, %out[%c2] : memref<?xf32>
      gpu.return
    }
  }
}
