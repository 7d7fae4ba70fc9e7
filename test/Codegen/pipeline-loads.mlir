// kvq-pipeline-loads: a streaming loop's loads, with their addresses, run
// the target's loadsInFlight iterations (4 on the GPU) ahead of their use;
// the prologue's loads and the loop's loads of iterations past the end are
// predicated, since trip counts are dynamic and may be shorter. Loops it
// cannot reorder, and the host's (the out-of-order core runs ahead by
// itself), are left alone.
// RUN: kvq-opt %s --kvq-pipeline-loads | FileCheck %s

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
  // CHECK: func.func @host_stream
  // CHECK: scf.for
  // CHECK-NOT: scf.if
  // CHECK: return
  module @c_host attributes {kvq.cache = @c} {
    func.func @host_stream(%src: memref<?xf16>, %dst: memref<64xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %t = %c0 to %n step %c1 {
        %off = arith.muli %t, %c64 : index
        %row = memref.subview %src[%off] [64] [1] : memref<?xf16> to memref<64xf16, strided<[1], offset: ?>>
        %x = memref.load %row[%c0] : memref<64xf16, strided<[1], offset: ?>>
        %y = arith.extf %x : f16 to f32
        memref.store %y, %dst[%c0] : memref<64xf32>
      }
      return
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // A row per token, summed into a scratch element: the row's address and
    // load are issued 4 tokens ahead. The prologue loads tokens 0..3 where
    // they exist; the loop carries 4 loaded values and loads token t + 4
    // where it exists. No epilogue: the loop runs the original iterations.
    // CHECK-LABEL: gpu.func @stream
    // CHECK-COUNT-4: memref.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>
    // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f16, f16, f16, f16) {
    // CHECK: memref.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>
    // CHECK: memref.load %{{.*}} : memref<64xf32>
    // CHECK: memref.store %{{.*}} : memref<64xf32>
    // CHECK: scf.yield
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @stream(%src: memref<?xf16>, %acc: memref<64xf32>, %first: index, %last: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %t = %first to %last step %c1 {
        %off = arith.muli %t, %c64 : index
        %row = memref.subview %src[%off] [64] [1] : memref<?xf16> to memref<64xf16, strided<[1], offset: ?>>
        %x = memref.load %row[%c0] : memref<64xf16, strided<[1], offset: ?>>
        %y = arith.extf %x : f16 to f32
        %a = memref.load %acc[%c0] : memref<64xf32>
        %s = arith.addf %a, %y : f32
        memref.store %s, %acc[%c0] : memref<64xf32>
      }
      gpu.return
    }

    // Loads a thread keeps in flight are capped at 64 registers a loop: a
    // row of 32 floats (32 registers) an iteration is issued 2 iterations
    // ahead, a row of 64 floats none.
    // CHECK-LABEL: gpu.func @wide_rows
    // CHECK-COUNT-2: llvm.load %{{.*}} invariant : !llvm.ptr -> vector<32xf32>
    // CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<32xf32>, vector<32xf32>)  : i32 {
    // CHECK: gpu.return
    gpu.func @wide_rows(%src: !llvm.ptr, %acc: !llvm.ptr, %first: i32, %last: i32) kernel {
      %c1 = arith.constant 1 : i32
      %row = arith.constant 128 : i32
      scf.for %t = %first to %last step %c1 : i32 {
        %off = arith.muli %t, %row : i32
        %p = llvm.getelementptr %src[%off] : (!llvm.ptr, i32) -> !llvm.ptr, i8
        %x = llvm.load %p invariant : !llvm.ptr -> vector<32xf32>
        llvm.store %x, %acc : vector<32xf32>, !llvm.ptr
      }
      gpu.return
    }

    // CHECK-LABEL: gpu.func @widest_rows
    // CHECK-NOT: scf.if
    // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}}  : i32 {
    // CHECK-NEXT: arith.muli
    // CHECK-NEXT: llvm.getelementptr
    // CHECK-NEXT: llvm.load %{{.*}} invariant : !llvm.ptr -> vector<64xf32>
    // CHECK: gpu.return
    gpu.func @widest_rows(%src: !llvm.ptr, %acc: !llvm.ptr, %first: i32, %last: i32) kernel {
      %c1 = arith.constant 1 : i32
      %row = arith.constant 256 : i32
      scf.for %t = %first to %last step %c1 : i32 {
        %off = arith.muli %t, %row : i32
        %p = llvm.getelementptr %src[%off] : (!llvm.ptr, i32) -> !llvm.ptr, i8
        %x = llvm.load %p invariant : !llvm.ptr -> vector<64xf32>
        llvm.store %x, %acc : vector<64xf32>, !llvm.ptr
      }
      gpu.return
    }

    // The loop writes the buffer it reads (through another view of it):
    // its loads stay in order with its stores.
    // CHECK-LABEL: gpu.func @in_place
    // CHECK: scf.for
    // CHECK-NOT: iter_args
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @in_place(%buf: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %t = %c0 to %n step %c1 {
        %off = arith.muli %t, %c64 : index
        %row = memref.subview %buf[%off] [64] [1] : memref<?xf32> to memref<64xf32, strided<[1], offset: ?>>
        %x = memref.load %row[%c0] : memref<64xf32, strided<[1], offset: ?>>
        %y = arith.addf %x, %x : f32
        memref.store %y, %buf[%t] : memref<?xf32>
      }
      gpu.return
    }

    // The address comes from a buffer the loop writes: the load that reads
    // it stays behind the previous iteration's store, and so does the
    // stream load that needs it.
    // CHECK-LABEL: gpu.func @written_index
    // CHECK: scf.for
    // CHECK-NOT: iter_args
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @written_index(%src: memref<?xf32>, %idx: memref<?xindex>, %out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      scf.for %t = %c0 to %n step %c1 {
        %i = memref.load %idx[%t] : memref<?xindex>
        %x = memref.load %src[%i] : memref<?xf32>
        memref.store %x, %out[%t] : memref<?xf32>
        %next = arith.addi %t, %c1 : index
        memref.store %i, %idx[%next] : memref<?xindex>
      }
      gpu.return
    }

    // Each address comes from the previous iteration's load (a chain): no
    // load can be issued ahead.
    // CHECK-LABEL: gpu.func @chain
    // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (i32) {
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @chain(%next: memref<?xi32>, %out: memref<1xi32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %i0 = arith.constant 0 : i32
      %end = scf.for %t = %c0 to %n step %c1 iter_args(%at = %i0) -> (i32) {
        %i = arith.index_castui %at : i32 to index
        %v = memref.load %next[%i] : memref<?xi32>
        scf.yield %v : i32
      }
      memref.store %end, %out[%c0] : memref<1xi32>
      gpu.return
    }

    // An emitted kernel's loop: its pointer load marked invariant (nothing
    // writes that memory during the launch) streams, 4 tokens ahead, with
    // its address; the load of the memory the loop stores to stays.
    // CHECK-LABEL: gpu.func @pointers
    // CHECK-COUNT-4: llvm.load %{{.*}} invariant : !llvm.ptr -> vector<8xf16>
    // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>)  : i32 {
    // CHECK: llvm.load %{{.*}} invariant : !llvm.ptr -> vector<8xf16>
    // CHECK: llvm.load %{{.*}} : !llvm.ptr -> vector<8xf16>
    // CHECK: llvm.store
    // CHECK: scf.yield
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @pointers(%src: !llvm.ptr, %acc: !llvm.ptr, %first: i32, %last: i32) kernel {
      %c1 = arith.constant 1 : i32
      %row = arith.constant 256 : i32
      scf.for %t = %first to %last step %c1 : i32 {
        %off = arith.muli %t, %row : i32
        %p = llvm.getelementptr %src[%off] : (!llvm.ptr, i32) -> !llvm.ptr, i8
        %x = llvm.load %p invariant : !llvm.ptr -> vector<8xf16>
        %a = llvm.load %acc : !llvm.ptr -> vector<8xf16>
        %s = arith.addf %a, %x : vector<8xf16>
        llvm.store %s, %acc : vector<8xf16>, !llvm.ptr
      }
      gpu.return
    }

    // A pointer load not marked invariant may read what the loop, or
    // another thread, writes: it stays in its iteration.
    // CHECK-LABEL: gpu.func @plain_pointer
    // CHECK: scf.for
    // CHECK-NOT: iter_args
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @plain_pointer(%src: !llvm.ptr, %dst: !llvm.ptr, %n: i32) kernel {
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      scf.for %t = %c0 to %n step %c1 : i32 {
        %p = llvm.getelementptr %src[%t] : (!llvm.ptr, i32) -> !llvm.ptr, f32
        %x = llvm.load %p : !llvm.ptr -> f32
        %q = llvm.getelementptr %dst[%t] : (!llvm.ptr, i32) -> !llvm.ptr, f32
        llvm.store %x, %q : f32, !llvm.ptr
      }
      gpu.return
    }

    // A loop holding a branch is no streaming loop; the loop around it
    // neither.
    // CHECK-LABEL: gpu.func @branch
    // CHECK: scf.for
    // CHECK-NOT: iter_args
    // CHECK: scf.if
    // CHECK-NOT: scf.if
    // CHECK: gpu.return
    gpu.func @branch(%src: memref<?xf32>, %dst: memref<?xf32>, %n: index, %p: i1) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      scf.for %t = %c0 to %n step %c1 {
        scf.if %p {
          %x = memref.load %src[%t] : memref<?xf32>
          memref.store %x, %dst[%t] : memref<?xf32>
        }
      }
      gpu.return
    }
  }
}
