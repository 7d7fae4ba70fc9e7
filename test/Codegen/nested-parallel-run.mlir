// A parallel loop inside another on the GPU, run: the outer loop's
// iterations (tokens) over the block's threads, the inner one (a token's
// dots with two query rows over its 16 channels) in order in its thread,
// its sums scalar accumulators, its rows read 16 bytes at a time (the keys'
// row is 16-byte aligned: 8 f16 a load). 130 tokens over 128 threads: two
// threads take two tokens.
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=NOT-PTX < %t.ptx
// RUN: %python -c "import struct, sys; sys.stdout.buffer.write(b''.join(struct.pack('<e', t + c) for t in range(130) for c in range(16)))" > %t.keys
// RUN: kvq-ptx-run %t.ptx --kernel dots --block 128 --buf k=%t.keys \
// RUN:   --buf-values q=f32:1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 \
// RUN:   --buf-zero s=1040 \
// RUN:   --arg ptr:k --arg ptr:k --arg u64:0 --arg u64:2080 --arg u64:1 \
// RUN:   --arg ptr:q --arg ptr:q --arg u64:0 --arg u64:32 --arg u64:1 \
// RUN:   --arg ptr:s --arg ptr:s --arg u64:0 --arg u64:260 --arg u64:1 \
// RUN:   --arg u64:130 --print s:f32 | FileCheck %s

// Every load is 16 bytes: the keys' two a token and the queries' eight
// (LLVM hoists them out of the token loop), none of one element; no
// shuffles or shared memory (nothing crosses threads).
// PTX-COUNT-10: ld.global.v4.b32
// NOT-PTX-NOT: ld.global.{{(nc.)?[bfsu][0-9]+}}
// NOT-PTX-NOT: shfl
// NOT-PTX-NOT: .shared

// Key (t, c) is t + c: token t's dots are 16 t + 120 (the query of ones)
// and 120 t + 1240 (the query 0, 1, ..., 15).
// CHECK:      s[0] = 120
// CHECK-NEXT: s[1] = 136
// CHECK:      s[128] = 2168
// CHECK-NEXT: s[129] = 2184
// CHECK-NEXT: s[130] = 1240
// CHECK-NEXT: s[131] = 1360
// CHECK:      s[258] = 16600
// CHECK-NEXT: s[259] = 16720

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
    gpu.func @dots(%k: memref<?xf16>, %q: memref<32xf32>, %s: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f32
      %keys = memref.assume_alignment %k, 16 : memref<?xf16>
      %queries = memref.assume_alignment %q, 16 : memref<32xf32>
      %q0 = memref.subview %queries[0] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1]>>
      %q1 = memref.subview %queries[16] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1], offset: 16>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %at = arith.muli %t, %c16 : index
        %row = memref.subview %keys[%at] [16] [1] : memref<?xf16> to memref<16xf16, strided<[1], offset: ?>>
        %d:2 = scf.parallel (%c) = (%c0) to (%c16) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %x = memref.load %row[%c] : memref<16xf16, strided<[1], offset: ?>>
          %k32 = arith.extf %x : f16 to f32
          %a = memref.load %q0[%c] : memref<16xf32, strided<[1]>>
          %b = memref.load %q1[%c] : memref<16xf32, strided<[1], offset: 16>>
          %pa = arith.mulf %a, %k32 : f32
          %pb = arith.mulf %b, %k32 : f32
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
        memref.store %d#0, %s[%t] : memref<?xf32>
        %second = arith.addi %t, %n : index
        memref.store %d#1, %s[%second] : memref<?xf32>
        scf.reduce
      }
      gpu.return
    }
  }
}
