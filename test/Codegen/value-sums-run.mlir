// A split's value sums on the GPU, run: a loop over 64 channels around
// sums over the tokens of two heads' weights times the channel's values.
// The value rows are 16-byte aligned, so a thread takes a run of 8
// channels (one 16-byte load of each token's row), the 8 runs leave 16
// threads to each, and a run's 16 workers take every 16th token, their 16
// sums (2 heads x 8 channels) combined by shuffles. 100 tokens.
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=NOT-PTX < %t.ptx
// RUN: %python -c "import struct, sys; sys.stdout.buffer.write(b''.join(struct.pack('<e', t + c) for t in range(100) for c in range(64)))" > %t.values
// RUN: %python -c "import struct, sys; sys.stdout.buffer.write(b''.join(struct.pack('<f', w) for w in [1.0] * 100 + [float(t) for t in range(100)]))" > %t.weights
// RUN: kvq-ptx-run %t.ptx --kernel sums --block 128 --buf v=%t.values \
// RUN:   --buf p=%t.weights --buf-zero o0=256 --buf-zero o1=256 \
// RUN:   --arg ptr:v --arg ptr:v --arg u64:0 --arg u64:6400 --arg u64:1 \
// RUN:   --arg ptr:p --arg ptr:p --arg u64:0 --arg u64:200 --arg u64:1 \
// RUN:   --arg ptr:o0 --arg ptr:o0 --arg u64:0 --arg u64:64 --arg u64:1 \
// RUN:   --arg u64:100 \
// RUN:   --arg ptr:o1 --arg ptr:o1 --arg u64:0 --arg u64:64 --arg u64:1 \
// RUN:   --print o0:f32 --print o1:f32 | FileCheck %s

// Each token's row is one 16-byte load a thread; four butterfly steps of
// 16 sums.
// PTX: ld.global.v4.b32
// PTX-COUNT-64: shfl.sync.bfly.b32
// PTX-NOT: shfl
// NOT-PTX-NOT: ld.global.{{(nc.)?[bfsu]}}16
// NOT-PTX-NOT: .shared

// Value (t, c) is t + c; head 0 weighs every token 1, head 1 token t by t:
// sums 4950 + 100 c and 328350 + 4950 c.
// CHECK:      o0[0] = 4950
// CHECK-NEXT: o0[1] = 5050
// CHECK:      o0[63] = 11250
// CHECK:      o1[0] = 328350
// CHECK-NEXT: o1[1] = 333300
// CHECK:      o1[63] = 640200

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
    gpu.func @sums(%values: memref<?xf16>, %p: memref<?xf32>, %o0: memref<64xf32>, %n: index, %o1: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %v = memref.assume_alignment %values, 16 : memref<?xf16>
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %s:2 = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %at = arith.muli %t, %c64 : index
          %row = memref.subview %v[%at] [64] [1] : memref<?xf16> to memref<64xf16, strided<[1], offset: ?>>
          %x = memref.load %row[%c] : memref<64xf16, strided<[1], offset: ?>>
          %x32 = arith.extf %x : f16 to f32
          %a = memref.load %p[%t] : memref<?xf32>
          %t2 = arith.addi %t, %n : index
          %b = memref.load %p[%t2] : memref<?xf32>
          %pa = arith.mulf %a, %x32 : f32
          %pb = arith.mulf %b, %x32 : f32
          scf.reduce(%pa, %pb : f32, f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s#0, %o0[%c] : memref<64xf32>
        memref.store %s#1, %o1[%c] : memref<64xf32>
        scf.reduce
      }
      gpu.return
    }
  }
}
