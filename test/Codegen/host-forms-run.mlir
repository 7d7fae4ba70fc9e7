// The host's forms of the attention loops' shapes, run on upstream's JIT
// runner: a token's dots with two query rows (the channels 16 lanes, the
// two dots folded together after the loop), and two heads' value sums over
// a loop over channels (the tokens in order, 64 channels a pass carried
// as vectors).
// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-vectorize-parallel | FileCheck %s --check-prefix=FORMS
// RUN: kvq-opt %s --kvq-vectorize-parallel --kvq-host-to-llvm -o %t.mlir
// RUN: %python %S/Inputs/extract-host.py %t.mlir c_host > %t.host.mlir
// RUN: mlir-runner %t.host.mlir -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_libs | FileCheck %s

// FORMS-LABEL: func.func @token_dots
// FORMS: -> (vector<16xf32>, vector<16xf32>)
// FORMS: vector.shuffle %{{.*}}#0, %{{.*}}#1
// FORMS-LABEL: func.func @value_sums
// FORMS: -> (vector<64xf32>, vector<64xf32>)
// FORMS-NOT: scf.parallel

// Key (t, c) is t + c: token t's dots are 16 t + 120 (the query of ones)
// and 120 t + 1240 (the query 0, 1, ..., 15).
// CHECK: [120,  136,  152,
// CHECK-SAME: 2168,  2184]
// CHECK: [1240,  1360,  1480,
// CHECK-SAME: 16600,  16720]
// Value (t, c) is t + c over 100 tokens; head 0 weighs every token 1, head
// 1 token t by t: sums 4950 + 100 c and 328350 + 4950 c.
// CHECK: [4950,  5050,
// CHECK-SAME: 11250]
// CHECK: [328350,  333300,
// CHECK-SAME: 640200]

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
    func.func @token_dots(%keys: memref<?xf16>, %queries: memref<32xf32>, %s: memref<?xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f32
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
      return
    }

    func.func @value_sums(%v: memref<?xf16>, %p: memref<?xf32>, %o0: memref<64xf32>, %n: index, %o1: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
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
      return
    }
    func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

    // Prints `count` elements of `buffer` from `first`.
    func.func @print(%buffer: memref<?xf32>, %first: index, %count: index) {
      %view = memref.subview %buffer[%first] [%count] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
      %all = memref.cast %view : memref<?xf32, strided<[1], offset: ?>> to memref<*xf32>
      func.call @printMemrefF32(%all) : (memref<*xf32>) -> ()
      return
    }

    func.func @main() {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.0 : f32
      // Dots: 130 tokens of 16 channels, the queries 1 and c.
      %tokens = arith.constant 130 : index
      %keys = memref.alloc() : memref<2080xf16>
      %queries = memref.alloc() : memref<32xf32>
      %dots = memref.alloc() : memref<260xf32>
      scf.for %t = %c0 to %tokens step %c1 {
        scf.for %c = %c0 to %c16 step %c1 {
          %tc = arith.addi %t, %c : index
          %i = arith.index_cast %tc : index to i32
          %k = arith.uitofp %i : i32 to f16
          %row = arith.muli %t, %c16 : index
          %at = arith.addi %row, %c : index
          memref.store %k, %keys[%at] : memref<2080xf16>
        }
      }
      scf.for %c = %c0 to %c16 step %c1 {
        memref.store %one, %queries[%c] : memref<32xf32>
        %i = arith.index_cast %c : index to i32
        %q = arith.uitofp %i : i32 to f32
        %at = arith.addi %c, %c16 : index
        memref.store %q, %queries[%at] : memref<32xf32>
      }
      %k = memref.cast %keys : memref<2080xf16> to memref<?xf16>
      %s = memref.cast %dots : memref<260xf32> to memref<?xf32>
      func.call @token_dots(%k, %queries, %s, %tokens) : (memref<?xf16>, memref<32xf32>, memref<?xf32>, index) -> ()
      func.call @print(%s, %c0, %tokens) : (memref<?xf32>, index, index) -> ()
      func.call @print(%s, %tokens, %tokens) : (memref<?xf32>, index, index) -> ()
      // Value sums: 100 tokens of 64 channels, the weights 1 and t.
      %n = arith.constant 100 : index
      %values = memref.alloc() : memref<6400xf16>
      %weights = memref.alloc() : memref<200xf32>
      %o0 = memref.alloc() : memref<64xf32>
      %o1 = memref.alloc() : memref<64xf32>
      scf.for %t = %c0 to %n step %c1 {
        scf.for %c = %c0 to %c64 step %c1 {
          %tc = arith.addi %t, %c : index
          %i = arith.index_cast %tc : index to i32
          %x = arith.uitofp %i : i32 to f16
          %row = arith.muli %t, %c64 : index
          %at = arith.addi %row, %c : index
          memref.store %x, %values[%at] : memref<6400xf16>
        }
        memref.store %one, %weights[%t] : memref<200xf32>
        %i = arith.index_cast %t : index to i32
        %w = arith.uitofp %i : i32 to f32
        %at = arith.addi %t, %n : index
        memref.store %w, %weights[%at] : memref<200xf32>
      }
      %v = memref.cast %values : memref<6400xf16> to memref<?xf16>
      %p = memref.cast %weights : memref<200xf32> to memref<?xf32>
      func.call @value_sums(%v, %p, %o0, %n, %o1) : (memref<?xf16>, memref<?xf32>, memref<64xf32>, index, memref<64xf32>) -> ()
      %s0 = memref.cast %o0 : memref<64xf32> to memref<?xf32>
      %s1 = memref.cast %o1 : memref<64xf32> to memref<?xf32>
      func.call @print(%s0, %c0, %c64) : (memref<?xf32>, index, index) -> ()
      func.call @print(%s1, %c0, %c64) : (memref<?xf32>, index, index) -> ()
      return
    }
  }
}
