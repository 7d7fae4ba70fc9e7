// kvq-expand-group-dots on a GPU with a warp's matrix unit (#kvq.mma
// m16n8k16): a parallel loop over rows whose iteration sums all the group
// dots of its row (span=channels keys: 2 groups of 32 channels a token, 3
// bits) and stores each head's sum becomes one iteration a thread of the
// block around a loop over its warp's tiles of 16 rows. Before that loop:
// each head's tile elements at the thread's channels as split f16 halves
// (B's columns) and the sums of the thread's heads. Per tile: each row's
// 24-bit run of codes (4 codes a step, 2 steps a group) a funnel shift
// of two words, two products a step (the halves), the sums scaled by each
// row's slope and offset, masked stores of the thread's rows and heads,
// and a warp barrier before the next tile's products (with a run-time
// number of groups, B and the sums read at each group). Where the tiles are
// not views of one row, or the loop over the rows writes them, each dot
// is summed on its own.
// RUN: kvq-opt %s --kvq-expand-group-dots | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // CHECK-LABEL: func.func @matrix
    // CHECK: scf.parallel (%[[THREAD:.*]]) = (%{{.*}}) to (%c128{{.*}}) step
    // CHECK-NOT: kvq.group_dot
    // B's columns of head (thread % 32) / 4 at channels 8 * (thread % 4):
    // CHECK: memref.load %arg2[
    // CHECK: %[[HI:.*]] = arith.truncf %{{.*}} : f32 to f16
    // CHECK: %[[BACK:.*]] = arith.extf %[[HI]] : f16 to f32
    // CHECK: arith.subf %{{.*}}, %[[BACK]]
    // CHECK: vector.from_elements {{.*}} : vector<2x2xf16>
    // CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %{{.*}} step %c4
    // Row 0's slope, then its run of codes from two words.
    // CHECK: memref.load %arg1
    // CHECK: memref.load %arg0
    // CHECK: memref.load %arg0
    // CHECK: llvm.call_intrinsic "llvm.fshr"
    // CHECK: arith.uitofp %{{.*}} : i32 to f16
    // CHECK: vector.from_elements {{.*}} : vector<4x2xf16>
    // CHECK-COUNT-4: nvgpu.mma.sync
    // CHECK: vector.extract %{{.*}}[0, 0] : f32 from vector<2x2xf32>
    // CHECK-COUNT-4: nvgpu.mma.sync
    // CHECK-COUNT-8: vector.maskedstore %arg5
    // CHECK: nvvm.bar.warp.sync
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: return
    func.func @matrix(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %q1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        memref.store %d#0, %out[%t] : memref<?xf32>
        memref.store %d#1, %out[%a1] : memref<?xf32>
        memref.store %d#2, %out[%a2] : memref<?xf32>
        memref.store %d#3, %out[%a3] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // A run-time number of groups a row: B's columns and the sums loaded at
    // each group, in a loop carrying the thread's sums inside the tile's.
    // CHECK-LABEL: func.func @run_time_groups
    // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4
    // CHECK: scf.for %{{.*}} = %{{.*}} to %arg8 step %{{.*}} iter_args(
    // CHECK: memref.load %arg4
    // CHECK: memref.load %arg2
    // CHECK: arith.truncf
    // CHECK: llvm.call_intrinsic "llvm.fshr"
    // CHECK-COUNT-4: nvgpu.mma.sync
    // CHECK: scf.yield
    // CHECK-COUNT-8: vector.maskedstore %arg5
    // CHECK: nvvm.bar.warp.sync
    func.func @run_time_groups(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%m) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %q1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        memref.store %d#0, %out[%t] : memref<?xf32>
        memref.store %d#1, %out[%a1] : memref<?xf32>
        memref.store %d#2, %out[%a2] : memref<?xf32>
        memref.store %d#3, %out[%a3] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // 64 rows, each head's sum added to what its place holds, a run-time
    // number of groups: the warps' tiles side by side (here one each),
    // B read once a group for them; the places read and written masked.
    // CHECK-LABEL: func.func @added_sums
    // CHECK-NOT: scf.for %{{.*}} step %c4
    // CHECK: scf.for %{{.*}} = %{{.*}} to %arg8 step %{{.*}} iter_args(
    // CHECK-COUNT-4: nvgpu.mma.sync
    // CHECK: scf.yield
    // CHECK: vector.maskedload %arg5
    // CHECK: vector.maskedstore %arg5
    // CHECK: nvvm.bar.warp.sync
    func.func @added_sums(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%t) = (%c0) to (%c64) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%m) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %q1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        %old0 = memref.load %out[%t] : memref<?xf32>
        %new0 = arith.addf %old0, %d#0 : f32
        memref.store %new0, %out[%t] : memref<?xf32>
        %old1 = memref.load %out[%a1] : memref<?xf32>
        %new1 = arith.addf %old1, %d#1 : f32
        memref.store %new1, %out[%a1] : memref<?xf32>
        %old2 = memref.load %out[%a2] : memref<?xf32>
        %new2 = arith.addf %old2, %d#2 : f32
        memref.store %new2, %out[%a2] : memref<?xf32>
        %old3 = memref.load %out[%a3] : memref<?xf32>
        %new3 = arith.addf %old3, %d#3 : f32
        memref.store %new3, %out[%a3] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // A head's tile is another row's: each dot on its own.
    // CHECK-LABEL: func.func @tiles_apart
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: vector.reduction
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: return
    func.func @tiles_apart(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %o1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        memref.store %d#0, %out[%t] : memref<?xf32>
        memref.store %d#1, %out[%a1] : memref<?xf32>
        memref.store %d#2, %out[%a2] : memref<?xf32>
        memref.store %d#3, %out[%a3] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // The loop over the rows writes the heads' row: each dot on its own.
    // CHECK-LABEL: func.func @writes_the_tiles
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: vector.reduction
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: return
    func.func @writes_the_tiles(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %q1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        memref.store %d#0, %out[%t] : memref<?xf32>
        memref.store %d#1, %out[%a1] : memref<?xf32>
        memref.store %d#2, %out[%a2] : memref<?xf32>
        memref.store %d#3, %out[%a3] : memref<?xf32>
        memref.store %d#0, %q[%c0] : memref<256xf32>
        scf.reduce
      }
      return
    }

    // Rows inside another parallel loop, which the GPU spreads otherwise:
    // each dot on its own.
    // CHECK-LABEL: func.func @nested_rows
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: vector.reduction
    // CHECK-NOT: nvgpu.mma.sync
    // CHECK: return
    func.func @nested_rows(%words: memref<?xi32>, %params: memref<?xf32>, %q: memref<256xf32>, %other: memref<256xf32>, %sums: memref<8xf32>, %out: memref<?xf32>, %n: index, %ld: index, %m: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %q0 = memref.subview %q[%c0] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q1 = memref.subview %q[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q2 = memref.subview %q[%c128] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %q3 = memref.subview %q[%c192] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      %o1 = memref.subview %other[%c64] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      scf.parallel (%u) = (%c0) to (%c1) step (%c1) {
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:4 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
          %c3 = arith.constant 3 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %q0[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t1 = vector.load %q1[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t2 = vector.load %q2[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %t3 = vector.load %q3[%first] : memref<64xf32, strided<[1], offset: ?>>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<8xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<8xf32>
          %g2 = arith.addi %g1, %c2 : index
          %s2 = memref.load %sums[%g2] : memref<8xf32>
          %g3 = arith.addi %g2, %c2 : index
          %s3 = memref.load %sums[%g3] : memref<8xf32>
          %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1, %t2, %t3) sums(%s0, %s1, %s2, %s3) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
          scf.reduce(%dot#0, %dot#1, %dot#2, %dot#3 : f32, f32, f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %a1 = arith.addi %t, %ld : index
        %a2 = arith.addi %a1, %ld : index
        %a3 = arith.addi %a2, %ld : index
        memref.store %d#0, %out[%t] : memref<?xf32>
        memref.store %d#1, %out[%a1] : memref<?xf32>
        memref.store %d#2, %out[%a2] : memref<?xf32>
        memref.store %d#3, %out[%a3] : memref<?xf32>
        scf.reduce
      }
      scf.reduce
      }
      return
    }
  }
}
