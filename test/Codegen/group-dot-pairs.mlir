// kvq-expand-group-dots on a host with 16-bit pair dots (cpu_dot): a loop
// summing all of a row's group dots, inside a loop over the rows that reads
// each tile's whole row unchanged (a span=channels key token's groups
// against each head's query), runs as the emitted span=channels key form
// (ChannelPairs.h): before the loop over the rows each head's row rounded
// to i16 once, in the pairs' channel order, and its groups' sums; per row
// the groups' code words one vector load, each vector of code pairs one
// byte shuffle, shift and mask, one vpdpwssd a head and vector, the heads'
// i32 lanes folded by group, scaled by the groups' slopes and offset by
// their sums. Where the loop over the rows writes a row, or a tile is not
// its group's part of a row (at g * group), the carried form keeps the f32
// products.
// RUN: kvq-opt %s --kvq-expand-group-dots | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "icelake-server", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32>
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  module @c_host attributes {kvq.cache = @c} {
    // CHECK-LABEL: func.func @pairs
    // CHECK: %[[ROW0:.*]] = vector.load %arg2[%{{.*}}] : memref<64xf32>, vector<64xf32>
    // CHECK: vector.reduction <maxnumf>
    // CHECK: %[[S0:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
    // CHECK: vector.shuffle %[[ROW0]], %[[ROW0]] [0, 1, 32, 33, 2, 3, 34, 35,
    // CHECK: llvm.call_intrinsic "llvm.roundeven"
    // CHECK: %[[Q00:.*]] = vector.bitcast %{{.*}} : vector<32xi16> to vector<16xi32>
    // CHECK: vector.shuffle %[[ROW0]], %[[ROW0]] [16, 17, 48, 49,
    // CHECK: %[[Q01:.*]] = vector.bitcast %{{.*}} : vector<32xi16> to vector<16xi32>
    // CHECK: vector.load %arg3[%{{.*}}] : memref<64xf32>, vector<64xf32>
    // The heads' group sums, both heads' at a group at once.
    // CHECK-COUNT-4: memref.load %arg4
    // CHECK: %[[SCALES:.*]] = vector.from_elements %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %{{.*}} : vector<16xf32>
    // CHECK: scf.parallel (%[[T:.*]]) =
    // CHECK-NOT: kvq.group_dot
    // Each group's slope and offset from one load of its parameter.
    // CHECK: %[[P0:.*]] = memref.load %arg1
    // CHECK: %[[O0:.*]] = arith.negf %[[P0]]
    // CHECK: %[[P1:.*]] = memref.load %arg1
    // CHECK: %[[O1:.*]] = arith.negf %[[P1]]
    // CHECK: vector.from_elements %[[P0]], %[[P1]] : vector<2xf32>
    // CHECK: vector.from_elements %[[O0]], %[[O1]] : vector<2xf32>
    // CHECK: %[[WORDS:.*]] = vector.load %arg0[%{{.*}}] : memref<?xi32>, vector<8xi32>
    // CHECK: %[[BYTES:.*]] = vector.bitcast %[[WORDS]] : vector<8xi32> to vector<32xi8>
    // CHECK: vector.shuffle %[[BYTES]], %[[BYTES]] [0, 1, 0, 1, 16, 17, 16, 17,
    // CHECK: arith.shrui %{{.*}} : vector<32xi16>
    // CHECK: %[[C0:.*]] = vector.bitcast %{{.*}} : vector<32xi16> to vector<16xi32>
    // CHECK: %[[D00:.*]] = llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
    // CHECK: %[[D10:.*]] = llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
    // CHECK: vector.shuffle %[[BYTES]], %[[BYTES]] [8, 9, 8, 9, 24, 25, 24, 25,
    // CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"(%[[D00]],
    // CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"(%[[D10]],
    // CHECK: %[[LANES:.*]] = arith.mulf %{{.*}}, %[[SCALES]] : vector<16xf32>
    // CHECK: %[[SUMS:.*]] = arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
    // CHECK: arith.mulf %[[SUMS]], %[[LANES]] : vector<16xf32>
    // CHECK: %[[SCORES:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
    // CHECK: vector.shuffle %[[SCORES]], %[[SCORES]] [1, 1, 3, 3,
    // CHECK: %[[BOTH:.*]] = arith.addf
    // CHECK: %[[H0:.*]] = vector.extract %[[BOTH]][0] : f32 from vector<16xf32>
    // CHECK: %[[H1:.*]] = vector.extract %[[BOTH]][8] : f32 from vector<16xf32>
    // CHECK: memref.store %[[H0]]
    // CHECK: memref.store %[[H1]]
    func.func @pairs(%words: memref<?xi32>, %params: memref<?xf32>, %row0: memref<64xf32>, %row1: memref<64xf32>, %sums: memref<4xf32>, %out: memref<?xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:2 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %c4 = arith.constant 4 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c4 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<4xi32>
          %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %row0[%first] : memref<64xf32>, vector<32xf32>
          %t1 = vector.load %row1[%first] : memref<64xf32>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<4xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<4xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1) sums(%s0, %s1) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
          scf.reduce(%dot#0, %dot#1 : f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %o1 = arith.addi %tg0, %c1 : index
        memref.store %d#0, %out[%tg0] : memref<?xf32>
        memref.store %d#1, %out[%o1] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // The loop over the rows writes a row: the carried f32 products.
    // CHECK-LABEL: func.func @writes_a_row
    // CHECK-NOT: vpdpwssd
    // CHECK: scf.parallel {{.*}} -> (vector<32xf32>, vector<32xf32>)
    // CHECK-NOT: vpdpwssd
    // CHECK: return
    func.func @writes_a_row(%words: memref<?xi32>, %params: memref<?xf32>, %row0: memref<64xf32>, %row1: memref<64xf32>, %sums: memref<4xf32>, %out: memref<?xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:2 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %c4 = arith.constant 4 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c4 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<4xi32>
          %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %row0[%first] : memref<64xf32>, vector<32xf32>
          %t1 = vector.load %row1[%first] : memref<64xf32>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<4xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<4xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1) sums(%s0, %s1) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
          scf.reduce(%dot#0, %dot#1 : f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %o1 = arith.addi %tg0, %c1 : index
        memref.store %d#0, %out[%tg0] : memref<?xf32>
        memref.store %d#1, %out[%o1] : memref<?xf32>
        memref.store %d#0, %row1[%c0] : memref<64xf32>
        scf.reduce
      }
      return
    }

    // A tile that is not its group's part of a row: the same.
    // CHECK-LABEL: func.func @tile_elsewhere
    // CHECK-NOT: vpdpwssd
    // CHECK: scf.parallel {{.*}} -> (vector<32xf32>, vector<32xf32>)
    // CHECK-NOT: vpdpwssd
    // CHECK: return
    func.func @tile_elsewhere(%words: memref<?xi32>, %params: memref<?xf32>, %row0: memref<64xf32>, %row1: memref<64xf32>, %sums: memref<4xf32>, %out: memref<?xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:2 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %c4 = arith.constant 4 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c4 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<4xi32>
          %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %first = arith.muli %g, %c32 : index
          %t0 = vector.load %row0[%first] : memref<64xf32>, vector<32xf32>
          %t1 = vector.load %row1[%c0] : memref<64xf32>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<4xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<4xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1) sums(%s0, %s1) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
          scf.reduce(%dot#0, %dot#1 : f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %o1 = arith.addi %tg0, %c1 : index
        memref.store %d#0, %out[%tg0] : memref<?xf32>
        memref.store %d#1, %out[%o1] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // Tiles from an offset not known to be 0: the same.
    // CHECK-LABEL: func.func @tile_offset
    // CHECK-NOT: vpdpwssd
    // CHECK: scf.parallel {{.*}} -> (vector<32xf32>, vector<32xf32>)
    // CHECK-NOT: vpdpwssd
    // CHECK: return
    func.func @tile_offset(%words: memref<?xi32>, %params: memref<?xf32>, %row0: memref<64xf32>, %row1: memref<64xf32>, %sums: memref<4xf32>, %out: memref<?xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %tg0 = arith.muli %t, %c2 : index
        %d:2 = scf.parallel (%g) = (%c0) to (%c2) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %c4 = arith.constant 4 : index
          %c32 = arith.constant 32 : index
          %tg = arith.addi %tg0, %g : index
          %at = arith.muli %tg, %c4 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<4xi32>
          %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
          %slope = memref.load %params[%tg] : memref<?xf32>
          %offset = arith.negf %slope : f32
          %g32 = arith.muli %g, %c32 : index
          %first = arith.addi %g32, %n : index
          %t0 = vector.load %row0[%first] : memref<64xf32>, vector<32xf32>
          %t1 = vector.load %row1[%first] : memref<64xf32>, vector<32xf32>
          %s0 = memref.load %sums[%g] : memref<4xf32>
          %g1 = arith.addi %g, %c2 : index
          %s1 = memref.load %sums[%g1] : memref<4xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%t0, %t1) sums(%s0, %s1) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
          scf.reduce(%dot#0, %dot#1 : f32, f32) {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }, {
          ^bb0(%x: f32, %y: f32):
            %s = arith.addf %x, %y : f32
            scf.reduce.return %s : f32
          }
        }
        %o1 = arith.addi %tg0, %c1 : index
        memref.store %d#0, %out[%tg0] : memref<?xf32>
        memref.store %d#1, %out[%o1] : memref<?xf32>
        scf.reduce
      }
      return
    }
  }
}
