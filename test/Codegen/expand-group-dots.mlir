// kvq-expand-group-dots: each kvq.group_dot in the forms of its module's
// target. On the host (SIMD registers), a loop summing one group dot's dots
// carries each head's products with the reconstructed group, tile * (slope
// * codes + offset), as a vector, and reduces each vector once after the
// loop, the heads' vectors together, joined with the loop's init; each
// head's products halved first where the heads' vectors would take more
// registers than the host keeps sums in. On the GPU, and for a dot no loop
// sums, each dot is reduced on its own and the slope and offset applied to
// it. A loop over channels around such a loop, where the channels' groups
// lie side by side, takes the dots element by element instead, so that its
// channels become the lanes.
// RUN: kvq-opt %s --kvq-expand-group-dots | FileCheck %s

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32>
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  module @c_host attributes {kvq.cache = @c} {
    // CHECK-LABEL: func.func @carried
    // CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<32xf32>
    // CHECK: %[[SUMS:.*]]:2 = scf.parallel (%{{.*}}) = {{.*}} init (%[[ZERO]], %[[ZERO]]) -> (vector<32xf32>, vector<32xf32>)
    // CHECK-NOT: kvq.group_dot
    // CHECK-DAG: %[[CODES:.*]] = arith.uitofp %{{.*}} : vector<32xi32> to vector<32xf32>
    // CHECK-DAG: %[[SLOPE:.*]] = vector.broadcast %arg4 : f32 to vector<32xf32>
    // CHECK-DAG: %[[OFFSET:.*]] = vector.broadcast %arg5 : f32 to vector<32xf32>
    // CHECK: %[[SCALED:.*]] = arith.mulf %[[CODES]], %[[SLOPE]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: %[[ELEMENTS:.*]] = arith.addf %[[SCALED]], %[[OFFSET]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: %[[P0:.*]] = arith.mulf %{{.*}}, %[[ELEMENTS]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: %[[P1:.*]] = arith.mulf %{{.*}}, %[[ELEMENTS]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: scf.reduce(%[[P0]], %[[P1]] : vector<32xf32>, vector<32xf32>)
    // CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<32xf32>
    // After the loop each head's vector halved to a register's 16 lanes,
    // then both reduced together (combineEach), then the loop's init added.
    // CHECK-DAG: %[[HIGH0:.*]] = vector.shuffle %[[SUMS]]#0, %[[SUMS]]#0 [16, 17, {{.*}}, 31] : vector<32xf32>, vector<32xf32>
    // CHECK-DAG: %[[LOW0:.*]] = vector.shuffle %[[SUMS]]#0, %[[SUMS]]#0 [0, 1, {{.*}}, 15] : vector<32xf32>, vector<32xf32>
    // CHECK: %[[HALF0:.*]] = arith.addf %[[LOW0]], %[[HIGH0]] fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: %[[HALF1:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: vector.shuffle %[[HALF0]], %[[HALF1]] [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
    // CHECK-NOT: vector.reduction
    // CHECK: %[[BOTH:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 8] : vector<16xf32>, vector<16xf32>
    // CHECK: %[[L0:.*]] = vector.extract %[[BOTH]][0] : f32 from vector<2xf32>
    // CHECK: %[[D0:.*]] = arith.addf %[[L0]], %arg3
    // CHECK: %[[L1:.*]] = vector.extract %[[BOTH]][1] : f32 from vector<2xf32>
    // CHECK: %[[D1:.*]] = arith.addf %[[L1]], %arg3
    // CHECK: return %[[D0]], %[[D1]]
    func.func @carried(%words: memref<?xi32>, %q: memref<?xf32>, %groups: index, %init: f32, %slope: f32, %offset: f32, %qs: f32) -> (f32, f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %d:2 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%init, %init) -> (f32, f32) {
        %w = vector.load %words[%g] : memref<?xi32>, vector<4xi32>
        %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
        %q0 = vector.load %q[%g] : memref<?xf32>, vector<32xf32>
        %q1 = vector.load %q[%c0] : memref<?xf32>, vector<32xf32>
        %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%q0, %q1) sums(%qs, %qs) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
        scf.reduce(%dot#0, %dot#1 : f32, f32) {
        ^bb0(%x: f32, %y: f32):
          %s = arith.addf %x, %y : f32
          scf.reduce.return %s : f32
        }, {
        ^bb0(%x: f32, %y: f32):
          %s = arith.addf %y, %x : f32
          scf.reduce.return %s : f32
        }
      }
      return %d#0, %d#1 : f32, f32
    }

    // Three heads, from zero: each vector halved to 16 lanes and reduced on
    // its own (combineEach takes a power of two of vectors).
    // CHECK-LABEL: func.func @three_heads
    // CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
    // CHECK: %[[SUMS:.*]]:3 = scf.parallel
    // CHECK: %[[H0:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: %[[H1:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: %[[H2:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: vector.reduction <add>, %[[H0]], %[[ZERO]] fastmath<reassoc,contract> : vector<16xf32> into f32
    // CHECK: vector.reduction <add>, %[[H1]], %[[ZERO]]
    // CHECK: vector.reduction <add>, %[[H2]], %[[ZERO]]
    func.func @three_heads(%codes: vector<32xi32>, %q: memref<?xf32>, %groups: index, %slope: f32, %offset: f32, %qs: f32) -> (f32, f32, f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %zero = arith.constant 0.0 : f32
      %d:3 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%zero, %zero, %zero) -> (f32, f32, f32) {
        %t = vector.load %q[%g] : memref<?xf32>, vector<32xf32>
        %dot:3 = kvq.group_dot %codes slope %slope offset %offset tiles(%t, %t, %t) sums(%qs, %qs, %qs) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32
        scf.reduce(%dot#0, %dot#1, %dot#2 : f32, f32, f32) {
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
      return %d#0, %d#1, %d#2 : f32, f32, f32
    }

    // A loop whose sums are not only the dots keeps them: each dot on its
    // own.
    // CHECK-LABEL: func.func @not_summed
    // CHECK: scf.parallel {{.*}} -> (f32, f32)
    // CHECK-NOT: kvq.group_dot
    // CHECK: vector.reduction <add>
    // CHECK: scf.reduce
    // CHECK: arith.maximumf
    func.func @not_summed(%words: memref<?xi32>, %q: memref<?xf32>, %groups: index, %init: f32, %slope: f32, %offset: f32, %qs: f32) -> (f32, f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %d:2 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%init, %init) -> (f32, f32) {
        %w = vector.load %words[%g] : memref<?xi32>, vector<4xi32>
        %codes = kvq.unpack %w {bits = 4 : i32, offset = 0 : i32, stride = 4 : i32} : vector<4xi32> -> vector<32xi32>
        %q0 = vector.load %q[%g] : memref<?xf32>, vector<32xf32>
        %q1 = vector.load %q[%c0] : memref<?xf32>, vector<32xf32>
        %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%q0, %q1) sums(%qs, %qs) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
        scf.reduce(%dot#0, %dot#1 : f32, f32) {
        ^bb0(%x: f32, %y: f32):
          %s = arith.addf %x, %y : f32
          scf.reduce.return %s : f32
        }, {
        ^bb0(%x: f32, %y: f32):
          %s = arith.maximumf %x, %y : f32
          scf.reduce.return %s : f32
        }
      }
      return %d#0, %d#1 : f32, f32
    }

    // A loop over channels around the sums of each channel's groups, a
    // channel's 3 words of 3-bit codes beside the next channel's (a
    // span=tokens value slice): each dot summed element by element, so that
    // the channels become the lanes (kvq-vectorize-parallel). The words are
    // loaded one by one, each code shifted out at its compile-time place
    // (code 10 straddles words 0 and 1), each tile element multiplied in
    // order, and the slope and offset folded after.
    // CHECK-LABEL: func.func @in_lanes
    // CHECK: scf.parallel (%[[C:.*]]) =
    // CHECK: scf.parallel (%{{.*}}) = {{.*}} -> (f32, f32)
    // CHECK-NOT: kvq.group_dot
    // CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %c3 : index
    // CHECK: %[[W0:.*]] = memref.load %arg0[%{{.*}}] : memref<?xi32>
    // CHECK: %[[AT1:.*]] = arith.addi %[[AT]], %c1{{.*}} : index
    // CHECK: %[[W1:.*]] = memref.load %arg0[%[[AT1]]] : memref<?xi32>
    // CHECK: %[[AT2:.*]] = arith.addi %[[AT]], %c2{{.*}} : index
    // CHECK: memref.load %arg0[%[[AT2]]] : memref<?xi32>
    // CHECK-NOT: vector.load %arg0
    // CHECK: arith.shrui %[[W0]], %c0_i32
    // CHECK: arith.andi %{{.*}}, %c7_i32
    // CHECK: vector.extract %[[Q0:.*]][0] : f32 from vector<32xf32>
    // CHECK: %[[SHIFTED:.*]] = arith.shrui %[[W0]], %c30_i32
    // CHECK: %[[HIGH:.*]] = arith.shli %[[W1]], %c2_i32
    // CHECK: arith.ori %[[SHIFTED]], %[[HIGH]]
    // CHECK: vector.extract %[[Q0]][31] : f32 from vector<32xf32>
    // CHECK: arith.mulf %arg4, %arg5 fastmath<reassoc,contract> : f32
    // CHECK: arith.mulf %arg3, %{{.*}} fastmath<reassoc,contract> : f32
    // CHECK: scf.reduce
    // CHECK-NOT: vector<32xf32>)
    // CHECK: memref.store
    func.func @in_lanes(%words: memref<?xi32>, %p: memref<?xf32>, %groups: index, %slope: f32, %offset: f32, %ps: f32, %o: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %d:2 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %row = arith.muli %g, %c64 : index
          %n = arith.addi %row, %c : index
          %at = arith.muli %n, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %t = arith.muli %g, %c32 : index
          %p0 = vector.load %p[%t] : memref<?xf32>, vector<32xf32>
          %p1 = vector.load %p[%c0] : memref<?xf32>, vector<32xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%p0, %p1) sums(%ps, %ps) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
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
        %sum = arith.addf %d#0, %d#1 : f32
        memref.store %sum, %o[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }

    // The same loops with the channels' groups a row of 8 groups apart
    // (24 words): lanes would read every 24th word, so the dots keep the
    // carried form.
    // CHECK-LABEL: func.func @lanes_apart
    // CHECK: scf.parallel (%{{.*}}) = {{.*}} -> (vector<32xf32>, vector<32xf32>)
    // CHECK-NOT: memref.load %arg0
    func.func @lanes_apart(%words: memref<?xi32>, %p: memref<?xf32>, %groups: index, %slope: f32, %offset: f32, %ps: f32, %o: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c8 = arith.constant 8 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %d:2 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%zero, %zero) -> (f32, f32) {
          %row = arith.muli %c, %c8 : index
          %n = arith.addi %row, %g : index
          %at = arith.muli %n, %c3 : index
          %w = vector.load %words[%at] : memref<?xi32>, vector<3xi32>
          %codes = kvq.unpack %w {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<32xi32>
          %t = arith.muli %g, %c32 : index
          %p0 = vector.load %p[%t] : memref<?xf32>, vector<32xf32>
          %p1 = vector.load %p[%c0] : memref<?xf32>, vector<32xf32>
          %dot:2 = kvq.group_dot %codes slope %slope offset %offset tiles(%p0, %p1) sums(%ps, %ps) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
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
        %sum = arith.addf %d#0, %d#1 : f32
        memref.store %sum, %o[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }
  }

  // An AVX2 host: 8 lanes a register, 16 registers, sums kept in 8.
  kvq.cache @avx2 model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, vector_lanes = 8>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32>
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  module @avx2_host attributes {kvq.cache = @avx2} {
    // Four heads' 32-lane products would take the host's 16 registers: each
    // is halved to 16 lanes (two registers) before it is carried, 8 in all.
    // CHECK-LABEL: func.func @halved
    // CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
    // CHECK: scf.parallel (%{{.*}}) = {{.*}} init (%[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]]) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
    // CHECK: %[[ELEMENTS:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: %[[P0:.*]] = arith.mulf %{{.*}}, %[[ELEMENTS]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK-DAG: %[[LOW0:.*]] = vector.shuffle %[[P0]], %[[P0]] [0, 1, {{.*}}, 15] : vector<32xf32>, vector<32xf32>
    // CHECK-DAG: %[[HIGH0:.*]] = vector.shuffle %[[P0]], %[[P0]] [16, 17, {{.*}}, 31] : vector<32xf32>, vector<32xf32>
    // CHECK: %[[H0:.*]] = arith.addf %[[LOW0]], %[[HIGH0]] fastmath<reassoc,contract> : vector<16xf32>
    // CHECK: scf.reduce(%[[H0]], %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
    func.func @halved(%codes: vector<32xi32>, %q: memref<?xf32>, %groups: index, %slope: f32, %offset: f32, %qs: f32) -> (f32, f32, f32, f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %zero = arith.constant 0.0 : f32
      %d:4 = scf.parallel (%g) = (%c0) to (%groups) step (%c1) init (%zero, %zero, %zero, %zero) -> (f32, f32, f32, f32) {
        %q0 = vector.load %q[%g] : memref<?xf32>, vector<32xf32>
        %dot:4 = kvq.group_dot %codes slope %slope offset %offset tiles(%q0, %q0, %q0, %q0) sums(%qs, %qs, %qs, %qs) : vector<32xi32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32> -> f32, f32, f32, f32
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
      return %d#0, %d#1, %d#2, %d#3 : f32, f32, f32, f32
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // A thread's dots: each a reduction of the tile times the codes, then
    // the slope, plus the offset times the tile's sum.
    // CHECK-LABEL: func.func @each
    // CHECK-NOT: kvq.group_dot
    // CHECK: %[[CODES:.*]] = arith.uitofp %{{.*}} : vector<32xi32> to vector<32xf32>
    // CHECK: %[[PRODUCTS:.*]] = arith.mulf %{{.*}}, %[[CODES]] fastmath<reassoc,contract> : vector<32xf32>
    // CHECK: %[[DOT:.*]] = vector.reduction <add>, %[[PRODUCTS]] fastmath<reassoc,contract> : vector<32xf32> into f32
    // CHECK-DAG: %[[SCALED:.*]] = arith.mulf %arg1, %[[DOT]] fastmath<reassoc,contract> : f32
    // CHECK-DAG: %[[OFFSET:.*]] = arith.mulf %arg2, %arg4 fastmath<reassoc,contract> : f32
    // CHECK: %[[RESULT:.*]] = arith.addf %[[SCALED]], %[[OFFSET]] fastmath<reassoc,contract> : f32
    // CHECK: return %[[RESULT]]
    func.func @each(%codes: vector<32xi32>, %slope: f32, %offset: f32, %q: vector<32xf32>, %qs: f32) -> f32 {
      %d = kvq.group_dot %codes slope %slope offset %offset tiles(%q) sums(%qs) : vector<32xi32>, vector<32xf32> -> f32
      return %d : f32
    }
  }
}
