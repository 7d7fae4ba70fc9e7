// A reduction inside a parallel loop of a few iterations on the GPU, run:
// each of 4 rows (a head's scores) is a team of 32 threads (a warp), whose
// workers take every 32nd element of the row; their sums and maxima are
// combined by shuffles (no shared memory), and worker 0 stores them. Rows
// of 300 elements: workers own 9 or 10 of them.
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=NOT-PTX < %t.ptx
// RUN: kvq-ptx-run %t.ptx --kernel stats --block 128 \
// RUN:   --buf-iota x=f32:1200 --buf-zero out=32 \
// RUN:   --arg ptr:x --arg ptr:x --arg u64:0 --arg u64:1200 --arg u64:1 \
// RUN:   --arg ptr:out --arg ptr:out --arg u64:0 --arg u64:8 --arg u64:1 \
// RUN:   --arg u64:300 --print out:f32 | FileCheck %s
// Five rows: teams of 16, the fifth filling half of the third warp; the
// warp's other half repeats the last row (shuffles need the whole warp)
// and stores nothing.
// RUN: kvq-ptx-run %t.ptx --kernel stats5 --block 128 \
// RUN:   --buf-iota x=f32:1500 --buf-values out=f32:-7,-7,-7,-7,-7,-7,-7,-7,-7,-7,-7,-7 \
// RUN:   --arg ptr:x --arg ptr:x --arg u64:0 --arg u64:1500 --arg u64:1 \
// RUN:   --arg ptr:out --arg ptr:out --arg u64:0 --arg u64:12 --arg u64:1 \
// RUN:   --arg u64:300 --print out:f32 | FileCheck %s --check-prefix=FIVE

// Five butterfly steps a reduction for 4 rows, four for 5; no shared
// memory.
// PTX-LABEL: .entry stats(
// PTX-COUNT-10: shfl.sync.bfly.b32
// PTX-NOT: shfl
// PTX-LABEL: .entry stats5(
// PTX-COUNT-8: shfl.sync.bfly.b32
// PTX-NOT: shfl
// NOT-PTX-NOT: .shared

// Row r holds 300 r, ..., 300 r + 299: its sum is 90000 r + 44850, its
// largest 300 r + 299.
// CHECK:      out[0] = 44850
// CHECK-NEXT: out[1] = 299
// CHECK-NEXT: out[2] = 134850
// CHECK-NEXT: out[3] = 599
// CHECK-NEXT: out[4] = 224850
// CHECK-NEXT: out[5] = 899
// CHECK-NEXT: out[6] = 314850
// CHECK-NEXT: out[7] = 1199

// FIVE:      out[0] = 44850
// FIVE:      out[7] = 1199
// FIVE-NEXT: out[8] = 404850
// FIVE-NEXT: out[9] = 1499
// FIVE-NEXT: out[10] = -7
// FIVE-NEXT: out[11] = -7

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
    gpu.func @stats(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %lowest = arith.constant -1.0e+30 : f32
      scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
        %base = arith.muli %r, %n : index
        %s:2 = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero, %lowest) -> (f32, f32) {
          %i = arith.addi %base, %t : index
          %v = memref.load %x[%i] : memref<?xf32>
          scf.reduce(%v, %v : f32, f32) {
          ^bb0(%a: f32, %b: f32):
            %sum = arith.addf %a, %b : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%a: f32, %b: f32):
            %gt = arith.cmpf ogt, %a, %b : f32
            %max = arith.select %gt, %a, %b : f32
            scf.reduce.return %max : f32
          }
        }
        %at = arith.muli %r, %c2 : index
        memref.store %s#0, %out[%at] : memref<?xf32>
        %next = arith.addi %at, %c1 : index
        memref.store %s#1, %out[%next] : memref<?xf32>
        scf.reduce
      }
      gpu.return
    }

    gpu.func @stats5(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 5 : index
      %zero = arith.constant 0.0 : f32
      %lowest = arith.constant -1.0e+30 : f32
      scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
        %base = arith.muli %r, %n : index
        %s:2 = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero, %lowest) -> (f32, f32) {
          %i = arith.addi %base, %t : index
          %v = memref.load %x[%i] : memref<?xf32>
          scf.reduce(%v, %v : f32, f32) {
          ^bb0(%a: f32, %b: f32):
            %sum = arith.addf %a, %b : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%a: f32, %b: f32):
            %gt = arith.cmpf ogt, %a, %b : f32
            %max = arith.select %gt, %a, %b : f32
            scf.reduce.return %max : f32
          }
        }
        %at = arith.muli %r, %c2 : index
        memref.store %s#0, %out[%at] : memref<?xf32>
        %next = arith.addi %at, %c1 : index
        memref.store %s#1, %out[%next] : memref<?xf32>
        scf.reduce
      }
      gpu.return
    }
  }
}
