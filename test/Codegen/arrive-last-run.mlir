// The last block of a launch to arrive, as a kernel program says it with
// upstream ops alone (the attend kernel's merge of its splits): one
// thread of each block counts the block with an atomic add between
// acquire-release fences, in a parallel loop of one iteration
// (kvq-distribute-parallel gives it to thread 0 after the barrier that
// ends the block's writes); the verdict reaches the block through
// block-local memory; the last block resets the counter and reads every
// block's writes. The fences are explicit because LLVM 22's NVPTX backend
// drops an atomicrmw's ordering (`atomicrmw add acq_rel` is a relaxed
// `atom.global.add.u32`, no fence); on x86 an acq_rel fence is no
// instruction. Run on 8 blocks of 128 threads.
// RUN: kvq-opt %s --kvq-distribute-parallel --kvq-attach-nvvm-targets --kvq-gpu-to-binary -o %t.mlir
// RUN: %python %S/Inputs/extract-ptx.py %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: kvq-ptx-run %t.ptx --kernel arrive --grid 8 --block 128 \
// RUN:   --buf-zero partial=1024 --buf-values counter=u32:0 --buf-zero out=128 \
// RUN:   --arg ptr:partial --arg ptr:partial --arg u64:0 --arg u64:256 --arg u64:1 \
// RUN:   --arg ptr:counter --arg ptr:counter --arg u64:0 --arg u64:1 --arg u64:1 \
// RUN:   --arg ptr:out --arg ptr:out --arg u64:0 --arg u64:32 --arg u64:1 \
// RUN:   --arg u32:8 --print counter:u32 --print out:f32 | FileCheck %s

// PTX: bar.sync
// PTX: fence.acq_rel.sys
// PTX-NEXT: atom.global.add.u32
// PTX: fence.acq_rel.sys
// PTX: bar.sync

// The counter is back to 0; element c of the outputs is the sum over the
// 8 blocks of their element 32 b + c: 896 + 8 c.
// CHECK:      counter[0] = 0
// CHECK:      out[0] = 896
// CHECK-NEXT: out[1] = 904
// CHECK:      out[31] = 1144

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
    gpu.func @arrive(%partial: memref<?xf32>, %counter: memref<?xi32>, %out: memref<?xf32>, %blocks: i32)
        workgroup(%verdict: memref<1xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      %one = arith.constant 1 : i32
      %zero = arith.constant 0 : i32
      %nothing = arith.constant 0.0 : f32
      %b = gpu.block_id x
      %base = arith.muli %b, %c32 : index
      // This block's writes.
      scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
        %i = arith.addi %base, %c : index
        %i32 = arith.index_cast %i : index to i32
        %x = arith.uitofp %i32 : i32 to f32
        memref.store %x, %partial[%i] : memref<?xf32>
        scf.reduce
      }
      // Its arrival.
      scf.parallel (%t) = (%c0) to (%c1) step (%c1) {
        llvm.fence acq_rel
        %old = memref.atomic_rmw addi %one, %counter[%c0] : (i32, memref<?xi32>) -> i32
        %lastCount = arith.subi %blocks, %one : i32
        %last = arith.cmpi eq, %old, %lastCount : i32
        scf.if %last {
          llvm.fence acq_rel
          memref.store %zero, %counter[%c0] : memref<?xi32>
        }
        %flag = arith.extui %last : i1 to i32
        memref.store %flag, %verdict[%c0] : memref<1xi32, #gpu.address_space<workgroup>>
        scf.reduce
      }
      %flag = memref.load %verdict[%c0] : memref<1xi32, #gpu.address_space<workgroup>>
      %isLast = arith.cmpi eq, %flag, %one : i32
      // The last block reads every block's.
      scf.if %isLast {
        %blockCount = arith.index_cast %blocks : i32 to index
        scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
          %sum = scf.for %s = %c0 to %blockCount step %c1 iter_args(%acc = %nothing) -> f32 {
            %row = arith.muli %s, %c32 : index
            %i = arith.addi %row, %c : index
            %x = memref.load %partial[%i] : memref<?xf32>
            %next = arith.addf %acc, %x : f32
            scf.yield %next : f32
          }
          memref.store %sum, %out[%c] : memref<?xf32>
          scf.reduce
        }
      }
      gpu.return
    }
  }
}
