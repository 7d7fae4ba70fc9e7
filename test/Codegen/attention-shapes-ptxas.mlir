// The GPU forms of the attention loops' shapes at a model's sizes (head
// dim 128, a tile of 4 heads, a split's tokens known at run time) assemble
// for sm_80 and sm_90 without spilling: a token's dots (a token a thread,
// 16-byte loads, 4 accumulators), the heads' maxima and sums (a warp a
// head) and the value sums (a run of 8 channels a thread: 32 accumulators,
// teams of 8 over the tokens).
// REQUIRES: ptxas
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: %ptxas -arch=sm_80 -v %t.ptx -o %t.sm_80.cubin > %t.log 2>&1
// RUN: %ptxas -arch=sm_90 -v %t.ptx -o %t.sm_90.cubin >> %t.log 2>&1
// RUN: FileCheck %s --input-file=%t.log
// RUN: FileCheck %s --check-prefix=SPILLS --input-file=%t.log
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx

// CHECK-COUNT-6: 0 bytes spill stores, 0 bytes spill loads
// SPILLS-NOT: {{[1-9][0-9]*}} bytes spill

// The dots' keys and the value rows 16 bytes a load; the statistics' and
// the value sums' shares combined by shuffles.
// PTX-LABEL: .entry dots(
// PTX: ld.global.v4.b32
// PTX: ld.shared.v4.b32
// PTX-LABEL: .entry stats(
// PTX: shfl.sync.bfly.b32
// PTX-LABEL: .entry values(
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // scores[r][t] = q_r . k_t for 4 heads over 128 channels.
    gpu.func @dots(%k: memref<?xf16>, %s: memref<?xf32>, %n: index, %qin: memref<512xf32>)
        workgroup(%q: memref<512xf32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c128 = arith.constant 128 : index
      %zero = arith.constant 0.0 : f32
      %c512 = arith.constant 512 : index
      %keys = memref.assume_alignment %k, 16 : memref<?xf16>
      %queries = memref.assume_alignment %q, 16 : memref<512xf32, #gpu.address_space<workgroup>>
      scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
        %x = memref.load %qin[%i] : memref<512xf32>
        memref.store %x, %queries[%i] : memref<512xf32, #gpu.address_space<workgroup>>
        scf.reduce
      }
      %q0 = memref.subview %queries[0] [128] [1] : memref<512xf32, #gpu.address_space<workgroup>> to memref<128xf32, strided<[1]>, #gpu.address_space<workgroup>>
      %q1 = memref.subview %queries[128] [128] [1] : memref<512xf32, #gpu.address_space<workgroup>> to memref<128xf32, strided<[1], offset: 128>, #gpu.address_space<workgroup>>
      %q2 = memref.subview %queries[256] [128] [1] : memref<512xf32, #gpu.address_space<workgroup>> to memref<128xf32, strided<[1], offset: 256>, #gpu.address_space<workgroup>>
      %q3 = memref.subview %queries[384] [128] [1] : memref<512xf32, #gpu.address_space<workgroup>> to memref<128xf32, strided<[1], offset: 384>, #gpu.address_space<workgroup>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %at = arith.muli %t, %c128 : index
        %row = memref.subview %keys[%at] [128] [1] : memref<?xf16> to memref<128xf16, strided<[1], offset: ?>>
        %d:4 = scf.parallel (%c) = (%c0) to (%c128) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %x = memref.load %row[%c] : memref<128xf16, strided<[1], offset: ?>>
          %x32 = arith.extf %x : f16 to f32
          %a0 = memref.load %q0[%c] : memref<128xf32, strided<[1]>, #gpu.address_space<workgroup>>
          %a1 = memref.load %q1[%c] : memref<128xf32, strided<[1], offset: 128>, #gpu.address_space<workgroup>>
          %a2 = memref.load %q2[%c] : memref<128xf32, strided<[1], offset: 256>, #gpu.address_space<workgroup>>
          %a3 = memref.load %q3[%c] : memref<128xf32, strided<[1], offset: 384>, #gpu.address_space<workgroup>>
          %p0 = arith.mulf %a0, %x32 : f32
          %p1 = arith.mulf %a1, %x32 : f32
          %p2 = arith.mulf %a2, %x32 : f32
          %p3 = arith.mulf %a3, %x32 : f32
          scf.reduce(%p0, %p1, %p2, %p3 : f32, f32, f32, f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
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
        %t1 = arith.addi %t, %n : index
        memref.store %d#1, %s[%t1] : memref<?xf32>
        %n2 = arith.muli %n, %c2 : index
        %t2 = arith.addi %t, %n2 : index
        memref.store %d#2, %s[%t2] : memref<?xf32>
        %n3 = arith.muli %n, %c3 : index
        %t3 = arith.addi %t, %n3 : index
        memref.store %d#3, %s[%t3] : memref<?xf32>
        scf.reduce
      }
      gpu.return
    }

    // Each of 4 heads' maximum and sum over its row of scores.
    gpu.func @stats(%s: memref<?xf32>, %out: memref<8xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %lowest = arith.constant 0xFF800000 : f32
      scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
        %base = arith.muli %r, %n : index
        %m:2 = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%lowest, %zero) -> (f32, f32) {
          %i = arith.addi %base, %t : index
          %x = memref.load %s[%i] : memref<?xf32>
          scf.reduce(%x, %x : f32, f32) {
          ^bb0(%a: f32, %b: f32):
            %gt = arith.cmpf ogt, %a, %b : f32
            %max = arith.select %gt, %a, %b : f32
            scf.reduce.return %max : f32
          }, {
          ^bb0(%a: f32, %b: f32):
            %sum = arith.addf %a, %b : f32
            scf.reduce.return %sum : f32
          }
        }
        %at = arith.muli %r, %c2 : index
        memref.store %m#0, %out[%at] : memref<8xf32>
        %next = arith.addi %at, %c1 : index
        memref.store %m#1, %out[%next] : memref<8xf32>
        scf.reduce
      }
      gpu.return
    }

    // sums[r][c] = sum over t of p[r][t] v_t[c], 4 heads over 128 channels.
    gpu.func @values(%v: memref<?xf16>, %p: memref<?xf32>, %sums: memref<512xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %c384 = arith.constant 384 : index
      %zero = arith.constant 0.0 : f32
      %values = memref.assume_alignment %v, 16 : memref<?xf16>
      scf.parallel (%c) = (%c0) to (%c128) step (%c1) {
        %s:4 = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %at = arith.muli %t, %c128 : index
          %row = memref.subview %values[%at] [128] [1] : memref<?xf16> to memref<128xf16, strided<[1], offset: ?>>
          %x = memref.load %row[%c] : memref<128xf16, strided<[1], offset: ?>>
          %x32 = arith.extf %x : f16 to f32
          %w0 = memref.load %p[%t] : memref<?xf32>
          %i1 = arith.addi %t, %n : index
          %w1 = memref.load %p[%i1] : memref<?xf32>
          %n2 = arith.muli %n, %c2 : index
          %i2 = arith.addi %t, %n2 : index
          %w2 = memref.load %p[%i2] : memref<?xf32>
          %n3 = arith.muli %n, %c3 : index
          %i3 = arith.addi %t, %n3 : index
          %w3 = memref.load %p[%i3] : memref<?xf32>
          %p0 = arith.mulf %w0, %x32 : f32
          %p1 = arith.mulf %w1, %x32 : f32
          %p2 = arith.mulf %w2, %x32 : f32
          %p3 = arith.mulf %w3, %x32 : f32
          scf.reduce(%p0, %p1, %p2, %p3 : f32, f32, f32, f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }, {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s#0, %sums[%c] : memref<512xf32>
        %o1 = arith.addi %c, %c128 : index
        memref.store %s#1, %sums[%o1] : memref<512xf32>
        %o2 = arith.addi %c, %c256 : index
        memref.store %s#2, %sums[%o2] : memref<512xf32>
        %o3 = arith.addi %c, %c384 : index
        memref.store %s#3, %sums[%o3] : memref<512xf32>
        scf.reduce
      }
      gpu.return
    }
  }
}
