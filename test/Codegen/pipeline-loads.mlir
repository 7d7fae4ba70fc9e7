// kvq-pipeline-loads: a streaming loop's loads, with their addresses, run
// the target's loadsInFlight iterations (4 on the GPU; a kernel program's,
// expandedLoadsInFlight: 8) ahead of their use; the prologue's loads and
// the loop's loads of iterations past the end are predicated, since trip
// counts are dynamic and may be shorter. A kernel program's pipelined loop
// is unrolled by that distance. Loops it
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
    // A row per token, summed into a scratch element, in a kernel program
    // (memref loads): the row's address and load are issued 8 tokens ahead
    // (the target's expandedLoadsInFlight). The prologue loads tokens 0..7
    // where they exist. The loop is unrolled by 8 (modulo variable
    // expansion): each copy loads token t + 8 + k where it exists and uses
    // the value loaded 8 copies before, so the loop yields its 8 loads as
    // they are and no value moves between registers while in flight. The
    // iterations past the last whole 8 run in a second loop; no epilogue is
    // peeled. Both loops end no earlier than they start (upstream's
    // unrolling takes the bounds' difference as unsigned).
    // CHECK-LABEL: gpu.func @stream
    // CHECK-COUNT-8: memref.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>
    // CHECK: %[[END:.*]] = arith.maxsi %{{.*}}, %{{.*}} : index
    // CHECK: %[[MAIN:.*]]:8 = scf.for %{{.*}} = %{{.*}} to %[[WHOLE:.*]] step %{{.*}} iter_args(%[[A0:[^ ]*]] = %{{[^ ]*}}, %[[A1:[^ ]*]] = %{{[^ ]*}}, %{{[^ ]*}} = %{{[^ ]*}}, %{{[^ ]*}} = %{{[^ ]*}}, %{{[^ ]*}} = %{{[^ ]*}}, %{{[^ ]*}} = %{{[^ ]*}}, %{{[^ ]*}} = %{{[^ ]*}}, %[[A7:[^ ]*]] = %{{[^ ]*}}) -> (f16, f16, f16, f16, f16, f16, f16, f16) {
    // CHECK: %[[L0:.*]] = scf.if
    // CHECK: memref.load %{{.*}} : memref<64xf16, strided<[1], offset: ?>>
    // CHECK: arith.extf %[[A0]] : f16 to f32
    // CHECK: memref.store %{{.*}} : memref<64xf32>
    // CHECK: %[[L1:.*]] = scf.if
    // CHECK: arith.extf %[[A1]] : f16 to f32
    // CHECK-COUNT-6: scf.if
    // CHECK: arith.extf %[[A7]] : f16 to f32
    // CHECK: scf.yield %[[L0]], %[[L1]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]*}} : f16, f16, f16, f16, f16, f16, f16, f16
    // CHECK: scf.for %{{.*}} = %[[WHOLE]] to %[[END]] step %{{.*}} iter_args(%{{.*}} = %[[MAIN]]#0, %{{.*}} = %[[MAIN]]#1, %{{.*}} = %[[MAIN]]#2, %{{.*}} = %[[MAIN]]#3, %{{.*}} = %[[MAIN]]#4, %{{.*}} = %[[MAIN]]#5, %{{.*}} = %[[MAIN]]#6, %{{.*}} = %[[MAIN]]#7) -> (f16, f16, f16, f16, f16, f16, f16, f16) {
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

    // A page row through a block-local page table, weighted by a block-local
    // score: the table entry is part of the row's address, so it is issued
    // with the row, 8 tokens ahead; the score is block-local memory read in
    // a loop that streams from outside the block, so it is no stream and
    // stays with its use.
    // CHECK-LABEL: gpu.func @paged_stream
    // CHECK-NOT: memref.load %{{.*}} : memref<1024xf32>
    // CHECK-COUNT-8: memref.load %{{.*}} : memref<64xi32>
    // CHECK-NOT: memref.load %{{.*}} : memref<1024xf32>
    // CHECK: scf.for
    // CHECK: memref.load %{{.*}} : memref<64xi32>
    // CHECK: memref.load %{{.*}} : memref<?xf16>
    // CHECK: arith.extf %[[V:[^ ]*]] : f16 to f32
    // CHECK: memref.load %{{.*}} : memref<1024xf32>
    // CHECK: gpu.return
    gpu.func @paged_stream(%p: !llvm.ptr, %s: !llvm.ptr, %src: memref<?xf16>, %acc: memref<64xf32>, %first: index, %last: index) kernel {
      %pages = builtin.unrealized_conversion_cast %p : !llvm.ptr to memref<64xi32> {kvq.block_local}
      %scores = builtin.unrealized_conversion_cast %s : !llvm.ptr to memref<1024xf32> {kvq.block_local}
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %c64 = arith.constant 64 : index
      %c1024 = arith.constant 1024 : index
      scf.for %t = %first to %last step %c1 {
        %i = arith.divui %t, %c16 : index
        %page = memref.load %pages[%i] : memref<64xi32>
        %pi = arith.index_cast %page : i32 to index
        %base = arith.muli %pi, %c1024 : index
        %r = arith.remui %t, %c16 : index
        %ro = arith.muli %r, %c64 : index
        %off = arith.addi %base, %ro : index
        %x = memref.load %src[%off] : memref<?xf16>
        %y = arith.extf %x : f16 to f32
        %w = memref.load %scores[%t] : memref<1024xf32>
        %p2 = arith.mulf %w, %y : f32
        %a = memref.load %acc[%c0] : memref<64xf32>
        %sum = arith.addf %a, %p2 : f32
        memref.store %sum, %acc[%c0] : memref<64xf32>
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
