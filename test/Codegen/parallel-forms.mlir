// The targets' forms of a kernel program's scf.parallel: vectors on the
// host (kvq-vectorize-parallel), the block's threads on the GPU
// (kvq-distribute-parallel), and the loops each leaves alone.
// RUN: kvq-opt %s --kvq-vectorize-parallel | FileCheck %s --check-prefix=HOST
// RUN: kvq-opt %s --kvq-distribute-parallel | FileCheck %s --check-prefix=DEVICE

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  kvq.cache @d model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  kvq.cache @e model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, cpu_dot = #kvq.dot<m = 16, n = 1, k = 4, operands = i8, accumulator = i32>>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }

  module @c_host attributes {kvq.cache = @c} {
    // HOST-LABEL: func.func @doubles
    // HOST: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %[[L:.*]] {
    // HOST: %[[X:.*]] = vector.load %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST: %[[Y:.*]] = arith.mulf %[[X]], %{{.*}} : vector<16xf32>
    // HOST: vector.store %[[Y]], %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST-NOT: scf.parallel
    func.func @doubles(%m: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %two = arith.constant 2.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %x = memref.load %m[%c] : memref<64xf32>
        %y = arith.mulf %x, %two : f32
        memref.store %y, %m[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }

    // A trip count no power of two above 1 divides: one lane, left alone.
    // HOST-LABEL: func.func @odd
    // HOST: scf.parallel
    func.func @odd(%m: memref<63xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c63 = arith.constant 63 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%c) = (%c0) to (%c63) step (%c1) {
        memref.store %one, %m[%c] : memref<63xf32>
        scf.reduce
      }
      return
    }

    // The induction variable as a value, not an address: each lane's own,
    // the first lane's plus the lane.
    // HOST-LABEL: func.func @index_as_value
    // HOST: scf.for %[[FIRST:.*]] = %c0 to %c64 step %c16 {
    // HOST-DAG: %[[STEPS:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : vector<16xindex>
    // HOST-DAG: %[[FIRSTS:.*]] = vector.broadcast %[[FIRST]] : index to vector<16xindex>
    // HOST: %[[LANES:.*]] = arith.addi %[[FIRSTS]], %[[STEPS]] : vector<16xindex>
    // HOST: %[[I:.*]] = arith.index_cast %[[LANES]] : vector<16xindex> to vector<16xi32>
    // HOST: vector.store %[[I]], %arg0[%[[FIRST]]] : memref<64xi32>, vector<16xi32>
    func.func @index_as_value(%m: memref<64xi32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %i = arith.index_cast %c : index to i32
        memref.store %i, %m[%c] : memref<64xi32>
        scf.reduce
      }
      return
    }

    // Elements two apart are not a vector: left alone.
    // HOST-LABEL: func.func @strided
    // HOST: scf.parallel
    func.func @strided(%m: memref<64xf32, strided<[2]>>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        memref.store %one, %m[%c] : memref<64xf32, strided<[2]>>
        scf.reduce
      }
      return
    }

    // A flag set where any lane's element is not finite, and a counter
    // counting the lanes: one reduction and one branch for all the lanes,
    // the counter added once by the lanes that count.
    // HOST-LABEL: func.func @any_lane
    // HOST: scf.for
    // HOST: %[[BAD:.*]] = arith.cmpf uge, %{{.*}}, %{{.*}} : vector<16xf32>
    // HOST-NEXT: %[[ANY:.*]] = vector.reduction <or>, %[[BAD]] : vector<16xi1> into i1
    // HOST-NEXT: scf.if %[[ANY]] {
    // HOST-NEXT: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<1xi32>
    // HOST: %[[ONES:.*]] = arith.extui %{{.*}} : vector<16xi1> to vector<16xi32>
    // HOST-NEXT: %[[COUNT:.*]] = vector.reduction <add>, %[[ONES]] : vector<16xi32> into i32
    // HOST: %[[SOME:.*]] = arith.cmpi ne, %[[COUNT]], %{{.*}} : i32
    // HOST-NEXT: scf.if %[[SOME]] {
    // HOST-NEXT: %[[ADD:.*]] = arith.muli %{{.*}}, %[[COUNT]] : i32
    // HOST-NEXT: memref.atomic_rmw addi %[[ADD]], %{{.*}}[%{{.*}}] : (i32, memref<1xi32>) -> i32
    // HOST-NOT: scf.parallel
    func.func @any_lane(%m: memref<64xf32>, %flag: memref<1xi32>, %count: memref<1xi32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %inf = arith.constant 0x7F800000 : f32
      %zero = arith.constant 0.0 : f32
      %one = arith.constant 1 : i32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %x = memref.load %m[%c] : memref<64xf32>
        %bad = arith.cmpf uge, %x, %inf : f32
        scf.if %bad {
          memref.store %one, %flag[%c0] : memref<1xi32>
        }
        %negative = arith.cmpf olt, %x, %zero : f32
        scf.if %negative {
          %old = memref.atomic_rmw addi %one, %count[%c0] : (i32, memref<1xi32>) -> i32
        }
        scf.reduce
      }
      return
    }

    // A branch storing where the lane says is not a flag: left alone.
    // HOST-LABEL: func.func @lane_store
    // HOST: scf.parallel
    func.func @lane_store(%m: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %x = memref.load %m[%c] : memref<64xf32>
        %negative = arith.cmpf olt, %x, %zero : f32
        scf.if %negative {
          memref.store %zero, %m[%c] : memref<64xf32>
        }
        scf.reduce
      }
      return
    }

    // Iteration c stores its row of 2 words at 2c: the lanes' rows are
    // adjacent, so their words, interleaved, are one store.
    // HOST-LABEL: func.func @rows
    // HOST: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // HOST: %[[LO:.*]] = vector.load %{{.*}}[%[[C]]] : memref<32xi32>, vector<16xi32>
    // HOST: %[[HI:.*]] = arith.shrui %[[LO]], %{{.*}} : vector<16xi32>
    // HOST: %[[BOTH:.*]] = vector.shuffle %[[LO]], %[[HI]] [0, 1, {{.*}}, 31] : vector<16xi32>, vector<16xi32>
    // HOST-NEXT: %[[ROWS:.*]] = vector.shuffle %[[BOTH]], %[[BOTH]] [0, 16, 1, 17, {{.*}}, 15, 31] : vector<32xi32>, vector<32xi32>
    // HOST: %[[AT:.*]] = arith.muli %[[C]], %{{.*}} : index
    // HOST-NEXT: vector.store %[[ROWS]], %{{.*}}[%[[AT]]] : memref<64xi32>, vector<32xi32>
    func.func @rows(%m: memref<32xi32>, %out: memref<64xi32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c32 = arith.constant 32 : index
      %c16_i32 = arith.constant 16 : i32
      scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
        %lo = memref.load %m[%c] : memref<32xi32>
        %hi = arith.shrui %lo, %c16_i32 : i32
        %row = vector.from_elements %lo, %hi : vector<2xi32>
        %at = arith.muli %c, %c2 : index
        vector.store %row, %out[%at] : memref<64xi32>, vector<2xi32>
        scf.reduce
      }
      return
    }
    // Reductions: each lane's share carried as a vector from the identity
    // (0 for the sum, -inf for the maximum written as compare and select),
    // the lanes halved into one, then combined with the initial value.
    // HOST-LABEL: func.func @sum_and_max
    // HOST-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
    // HOST-DAG: %[[NEG:.*]] = arith.constant dense<0xFF800000> : vector<16xf32>
    // HOST: %[[R:.*]]:2 = scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[S:.*]] = %[[ZERO]], %[[M:.*]] = %[[NEG]]) -> (vector<16xf32>, vector<16xf32>) {
    // HOST: %[[X:.*]] = vector.load %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : vector<16xf32>
    // HOST: %[[S1:.*]] = arith.addf %[[S]], %[[SQ]] : vector<16xf32>
    // HOST: %[[GT:.*]] = arith.cmpf ogt, %[[M]], %[[X]] : vector<16xf32>
    // HOST: %[[M1:.*]] = arith.select %[[GT]], %[[M]], %[[X]] : vector<16xi1>, vector<16xf32>
    // HOST: scf.yield %[[S1]], %[[M1]]
    // HOST: %[[LO:.*]] = vector.shuffle %[[R]]#0, %[[R]]#0 [0, 1, 2, 3, 4, 5, 6, 7]
    // HOST: %[[HI:.*]] = vector.shuffle %[[R]]#0, %[[R]]#0 [8, 9, 10, 11, 12, 13, 14, 15]
    // HOST: arith.addf %[[LO]], %[[HI]] : vector<8xf32>
    // HOST: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
    // HOST: arith.addf %{{.*}}, %{{.*}} : vector<2xf32>
    // HOST: arith.addf %{{.*}}, %{{.*}} : vector<1xf32>
    // HOST: %[[SUM:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
    // HOST: arith.cmpf ogt, %{{.*}}, %{{.*}} : vector<8xf32>
    // HOST: %[[MAX:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
    // HOST: %[[TOTAL:.*]] = arith.addf %arg1, %[[SUM]] : f32
    // HOST: %[[GT2:.*]] = arith.cmpf ogt, %arg2, %[[MAX]] : f32
    // HOST: %[[BEST:.*]] = arith.select %[[GT2]], %arg2, %[[MAX]] : f32
    // HOST: return %[[TOTAL]], %[[BEST]]
    // HOST-NOT: scf.parallel
    func.func @sum_and_max(%m: memref<64xf32>, %s0: f32, %m0: f32) -> (f32, f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %r:2 = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%s0, %m0) -> (f32, f32) {
        %x = memref.load %m[%c] : memref<64xf32>
        %sq = arith.mulf %x, %x : f32
        scf.reduce(%sq, %x : f32, f32) {
        ^bb0(%a: f32, %b: f32):
          %sum = arith.addf %a, %b : f32
          scf.reduce.return %sum : f32
        }, {
        ^bb0(%a: f32, %b: f32):
          %gt = arith.cmpf ogt, %a, %b : f32
          %max = arith.select %gt, %a, %b : f32
          scf.reduce.return %max : f32
        }
      }
      return %r#0, %r#1 : f32, f32
    }

    // A reduction of vectors (no scalar identity): left alone.
    // HOST-LABEL: func.func @vector_sum
    // HOST: scf.parallel
    func.func @vector_sum(%m: memref<64xf32>, %s0: vector<4xf32>) -> vector<4xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %c4 = arith.constant 4 : index
      %r = scf.parallel (%i) = (%c0) to (%c16) step (%c1) init (%s0) -> vector<4xf32> {
        %at = arith.muli %i, %c4 : index
        %x = vector.load %m[%at] : memref<64xf32>, vector<4xf32>
        scf.reduce(%x : vector<4xf32>) {
        ^bb0(%a: vector<4xf32>, %b: vector<4xf32>):
          %s = arith.addf %a, %b : vector<4xf32>
          scf.reduce.return %s : vector<4xf32>
        }
      }
      return %r : vector<4xf32>
    }

    // A combiner kvq knows no identity of (a difference): left alone.
    // HOST-LABEL: func.func @no_identity
    // HOST: scf.parallel
    func.func @no_identity(%m: memref<64xf32>, %s0: f32) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %r = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%s0) -> f32 {
        %x = memref.load %m[%c] : memref<64xf32>
        scf.reduce(%x : f32) {
        ^bb0(%a: f32, %b: f32):
          %d = arith.subf %a, %b : f32
          scf.reduce.return %d : f32
        }
      }
      return %r : f32
    }

    // A parallel loop inside another (a token's dots with two query rows
    // over its channels, inside the loop over tokens): the inner one is
    // vectors, each sum a vector of the lanes' shares, the two folded
    // together (KernelBuilder::combineEach: one vector of both, then its
    // halves), stored as they are (the initial values are the sums'
    // identity, which the shares started from); the outer one is left to
    // the sequential lowering.
    // HOST-LABEL: func.func @token_dots
    // HOST: scf.parallel (%[[T:.*]]) =
    // HOST: %[[D:.*]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>) {
    // HOST: vector.load %{{.*}} vector<16xf16>
    // HOST: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
    // HOST: scf.yield
    // HOST-NEXT: }
    // HOST-NEXT: %[[LO:.*]] = vector.shuffle %[[D]]#0, %[[D]]#1 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
    // HOST-NEXT: %[[HI:.*]] = vector.shuffle %[[D]]#0, %[[D]]#1 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31]
    // HOST-NEXT: arith.addf %[[LO]], %[[HI]] : vector<16xf32>
    // HOST-COUNT-3: arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
    // HOST: %[[BOTH:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 8]
    // HOST: %[[D0:.*]] = vector.extract %[[BOTH]][0]
    // HOST: %[[D1:.*]] = vector.extract %[[BOTH]][1]
    // HOST-NOT: arith.addf
    // HOST: memref.store %[[D0]], %{{.*}}[%[[T]]]
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

    // Sums over tokens inside a loop over channels (a split's value sums
    // for two heads): the tokens in order, so that the channels are the
    // lanes, each head's sums a vector carried through the token loop; as
    // many channels a pass as keep the sums in 16 registers (here all 64:
    // 4 registers a head).
    // HOST-LABEL: func.func @value_sums
    // HOST: scf.for %[[C:.*]] = %c0{{.*}} to %c64{{.*}} step %c64{{.*}} {
    // HOST: %[[S:.*]]:2 = scf.for %[[T:.*]] = %c0{{.*}} to %arg3 step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<64xf32>, vector<64xf32>) {
    // HOST: %[[ROW:.*]] = memref.subview
    // HOST: vector.load %[[ROW]][%[[C]]] : {{.*}}, vector<64xf16>
    // HOST: memref.load %arg1[%[[T]]] : memref<?xf32>
    // HOST: scf.yield
    // HOST: vector.store %[[S]]#0, %arg2[%[[C]]] : memref<64xf32>, vector<64xf32>
    // HOST: vector.store %[[S]]#1, %arg4[%[[C]]] : memref<64xf32>, vector<64xf32>
    // HOST-NOT: scf.parallel
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
  }

  module @c_codes attributes {kvq.cache = @c} {
    // A quantized row's value sums (span=channels groups of 32 2-bit
    // codes): a channel's code is bits 2 (c mod 16) of word c / 16 of its
    // token's group c / 32. 16 channels share a word and a group, so they
    // are the lanes: the word and the group's parameters are loaded once
    // (the first lane's), each lane shifts the word by its own place, and
    // kvq.dequantize runs on the lanes. The 64 channels the sums' registers
    // hold are 4 such vectors, their loops over the tokens jammed into one
    // pass carrying 4 sums; what the 4 read alike (the token's weight) is
    // read once.
    // HOST-LABEL: func.func @code_sums
    // HOST: scf.for %[[C:.*]] = %c0{{.*}} to %c64{{.*}} step %c64{{.*}} {
    // HOST: %[[C16:.*]] = arith.addi %[[C]], %c16{{.*}} : index
    // HOST: scf.for %[[T:.*]] = %c0{{.*}} to %arg5 step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
    // HOST: memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: %[[WORD:.*]] = memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: %[[SCALE:.*]] = memref.load %arg1[%{{.*}}] : memref<?xf32>
    // HOST: %[[ZERO:.*]] = memref.load %arg2[%{{.*}}] : memref<?xf32>
    // HOST: %[[SHIFTED:.*]] = arith.shrui %{{.*}}, %{{.*}} : vector<16xi32>
    // HOST: %[[CODE:.*]] = arith.andi %[[SHIFTED]], %{{.*}} : vector<16xi32>
    // HOST: %[[CODEF:.*]] = arith.sitofp %[[CODE]] : vector<16xi32> to vector<16xf32>
    // HOST: arith.mulf %[[CODEF]], %{{.*}} : vector<16xf32>
    // HOST: memref.load %arg3[%[[T]]] : memref<?xf32>
    // HOST-NOT: memref.load %arg3
    // HOST: scf.yield
    // HOST: vector.store %{{.*}}, %arg4[%[[C]]] : memref<64xf32>, vector<16xf32>
    // HOST: vector.store %{{.*}}, %arg4[%[[C16]]] : memref<64xf32>, vector<16xf32>
    // HOST-NOT: kvq.dequantize
    func.func @code_sums(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %p: memref<?xf32>, %o: memref<64xf32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %s = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %ti = arith.index_castui %t : index to i32
          %g = arith.divui %ci, %c32_i32 : i32
          %k = arith.remui %ci, %c32_i32 : i32
          %tg = arith.muli %ti, %c2_i32 : i32
          %group = arith.addi %tg, %g : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %first = arith.muli %group, %c2_i32 : i32
          %wi = arith.addi %first, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = channels, group = 32>
          %a = memref.load %p[%t] : memref<?xf32>
          %ax = arith.mulf %a, %x : f32
          scf.reduce(%ax : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s, %o[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }

    // A span=tokens group's code of channel c (2 words of 2-bit codes a
    // group): word 2 (base + c) + w, its scale at base + c. The lanes'
    // words are every second of 31 consecutive words (a masked load of 32,
    // nothing past the 31st read), their scales 16 consecutive ones.
    // HOST-LABEL: func.func @strided_codes
    // HOST: scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c16{{.*}} iter_args
    // HOST: %[[LOADED:.*]] = vector.maskedload %arg0[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xi32>, vector<32xi1>, vector<32xi32> into vector<32xi32>
    // HOST: %[[WORDS:.*]] = vector.shuffle %[[LOADED]], %[[LOADED]] [0, 1, {{.*}}, 30] : vector<32xi32>, vector<32xi32>
    // HOST: vector.shuffle %[[WORDS]], %[[WORDS]] [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<31xi32>, vector<31xi32>
    // HOST: arith.shrui %{{.*}}, %{{.*}} : vector<16xi32>
    // HOST: vector.load %arg1[%{{.*}}] : memref<?xf32>, vector<16xf32>
    func.func @strided_codes(%codes: memref<?xi32>, %scales: memref<?xf32>, %base: i32, %w: i32, %shift: i32) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
        %ci = arith.index_castui %c : index to i32
        %n = arith.addi %base, %ci : i32
        %first = arith.muli %n, %c2_i32 : i32
        %wi = arith.addi %first, %w : i32
        %wx = arith.index_castui %wi : i32 to index
        %word = memref.load %codes[%wx] : memref<?xi32>
        %shifted = arith.shrui %word, %shift : i32
        %code = arith.andi %shifted, %c3_i32 : i32
        %nx = arith.index_castui %n : i32 to index
        %scale = memref.load %scales[%nx] : memref<?xf32>
        %codef = arith.uitofp %code : i32 to f32
        %x = arith.mulf %codef, %scale : f32
        scf.reduce(%x : f32) {
        ^bb0(%l: f32, %r: f32):
          %sum = arith.addf %l, %r : f32
          scf.reduce.return %sum : f32
        }
      }
      return %s : f32
    }

    // 4-bit codes: 8 channels share a word, so 8 lanes, 8 vectors of them
    // a pass over the tokens.
    // HOST-LABEL: func.func @wide_codes
    // HOST: scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c64{{.*}} {
    // HOST: scf.for %{{.*}} iter_args({{.*}}) -> (vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>, vector<8xi32>) {
    // HOST: memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: arith.shrui %{{.*}}, %{{.*}} : vector<8xi32>
    func.func @wide_codes(%codes: memref<?xi32>, %o: memref<64xi32>, %n: index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %c0_i32 = arith.constant 0 : i32
      %c4_i32 = arith.constant 4 : i32
      %c8_i32 = arith.constant 8 : i32
      %c15_i32 = arith.constant 15 : i32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %s = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%c0_i32) -> i32 {
          %ci = arith.index_castui %c : index to i32
          %ti = arith.index_castui %t : index to i32
          %row = arith.muli %ti, %c8_i32 : i32
          %w = arith.divui %ci, %c8_i32 : i32
          %wi = arith.addi %row, %w : i32
          %k = arith.remui %ci, %c8_i32 : i32
          %shift = arith.muli %k, %c4_i32 : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c15_i32 : i32
          scf.reduce(%code : i32) {
          ^bb0(%l: i32, %r: i32):
            %sum = arith.addi %l, %r : i32
            scf.reduce.return %sum : i32
          }
        }
        memref.store %s, %o[%c] : memref<64xi32>
        scf.reduce
      }
      return
    }

    // A split's span=tokens keys scored against a query (64 channels,
    // groups of 32 tokens, 2-bit codes): token t's code of channel c is
    // bits 2 (p mod 16) of word 2 (64 (p / 32) + c) + (p mod 32) / 16, p =
    // t - first its place past the first quantized token. The tokens are
    // the lanes where p is a multiple of 16 in the first lane, the 16
    // tokens' codes of a channel then one word: the loop runs its first
    // tokens one by one until p is (16 - (begin - first) mod 16) mod 16, at
    // most n, then vectors of 16 tokens, each reducing the channels in
    // order with its lanes' sums, storing 16 scores, then the rest one by
    // one. A score's place, the first lane's token past the split's first,
    // is a scalar: no lane reads it as a vector.
    // HOST-LABEL: func.func @token_rows
    // HOST: %[[K:.*]] = arith.subi %{{.*}}, %arg7 : i32
    // HOST: %[[KX:.*]] = arith.index_castui %[[K]] : i32 to index
    // HOST: %[[MOD:.*]] = arith.remui %[[KX]], %c16{{.*}} : index
    // HOST: %[[UP:.*]] = arith.subi %c16{{.*}}, %[[MOD]] : index
    // HOST: %[[PEEL:.*]] = arith.remui %[[UP]], %c16{{.*}} : index
    // HOST: %[[START:.*]] = arith.minui %[[PEEL]], %arg5 : index
    // HOST: scf.for %{{.*}} = %c0{{.*}} to %[[START]] step %c1{{.*}} {
    // HOST: %[[END:.*]] = arith.addi %[[START]], %{{.*}} : index
    // HOST: scf.for %[[FIRST:.*]] = %[[START]] to %[[END]] step %c16{{.*}} {
    // HOST: %[[SUM:.*]] = scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c1{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (vector<16xf32>) {
    // HOST: %[[WORD:.*]] = memref.load %arg0[%{{.*}}] : memref<?xi32>
    // HOST: %[[LANEWORDS:.*]] = vector.broadcast %[[WORD]] : i32 to vector<16xi32>
    // HOST: %[[SHIFTED:.*]] = arith.shrui %[[LANEWORDS]], %{{.*}} : vector<16xi32>
    // HOST: arith.andi %[[SHIFTED]], %{{.*}} : vector<16xi32>
    // HOST: %[[SCALE:.*]] = memref.load %arg1[%{{.*}}] : memref<?xf32>
    // HOST: %[[NEXT:.*]] = arith.addf %[[ACC]], %{{.*}} : vector<16xf32>
    // HOST: scf.yield %[[NEXT]] : vector<16xf32>
    // HOST-NOT: vector<16xi32>
    // HOST: %[[LOCAL:.*]] = arith.subi %{{.*}}, %arg6 : i32
    // HOST: %[[AT:.*]] = arith.index_castui %[[LOCAL]] : i32 to index
    // HOST-NOT: vector<16xi32>
    // HOST: vector.store %[[SUM]], %arg4[%[[AT]]] : memref<?xf32>, vector<16xf32>
    // HOST: scf.for %{{.*}} = %[[END]] to %arg5 step %c1{{.*}} {
    // HOST-NOT: scf.parallel
    // HOST: return
    func.func @token_rows(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %q: memref<64xf32>, %scores: memref<?xf32>, %n: index, %begin: i32, %first: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %ii = arith.index_castui %i : index to i32
        %t = arith.addi %begin, %ii : i32
        %p = arith.subi %t, %first : i32
        %block = arith.divui %p, %c32_i32 : i32
        %k = arith.remui %p, %c32_i32 : i32
        %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %base = arith.muli %block, %c64_i32 : i32
          %group = arith.addi %base, %ci : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %first_word = arith.muli %group, %c2_i32 : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %wi = arith.addi %first_word, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = tokens, group = 32>
          %qc = memref.load %q[%c] : memref<64xf32>
          %prod = arith.mulf %qc, %x : f32
          scf.reduce(%prod : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        %local = arith.subi %t, %begin : i32
        %lx = arith.index_castui %local : i32 to index
        memref.store %s, %scores[%lx] : memref<?xf32>
        scf.reduce
      }
      return
    }
  }

  module @d_pairs attributes {kvq.cache = @d} {
    // @token_rows on a host with i16 pair dots (AVX-512 VNNI): the loop is
    // peeled to a group of 32 tokens, 2 vectors of 16 a pass. Per pass, the
    // query times the channels' slopes (stored), its largest magnitude and
    // its sum with the offsets are one loop over the channels (on vectors
    // of channels); the folded query is rounded to i16 against the largest;
    // then per pair of channels each lane's two codes, the first channel's
    // in the low half, meet the two rounded factors in one vpdpwssd a
    // vector; the i32 sums go to f32 times largest / 32767, plus the
    // offsets' sum. A pair's 4 words (2 channels x the 2 vectors' words,
    // channel c's at 2c and 2c + 1) are one vector load; each vector's
    // lanes gather the bytes their codes start in (lane l of the first
    // vector bytes 0-1 of channel c's word and 8-9 of channel c + 1's while
    // l < 4) and shift by 2 * (l mod 4) under the mask 0x00030003: no
    // channel's word loaded alone or code shifted into its half.
    // HOST-LABEL: func.func @pair_rows
    // HOST-DAG: %[[FOLDED:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
    // HOST-DAG: %[[BYTES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xi8>
    // HOST-DAG: %[[ROUNDED:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<128xi8> to memref<64xi16>
    // HOST-DAG: %[[PAIRS:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<128xi8> to memref<32xi32>
    // HOST: arith.remui %{{.*}}, %c32{{.*}} : index
    // HOST: scf.for %[[FIRST:.*]] = %{{.*}} to %{{.*}} step %c32{{.*}} {
    // HOST: %[[FOLDS:.*]]:2 = scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>) {
    // HOST: vector.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<64xf32, strided<[1], offset: ?>>, vector<16xf32>
    // HOST: llvm.call_intrinsic "llvm.fabs"(%{{.*}}) : (vector<16xf32>) -> vector<16xf32>
    // HOST: arith.divf %{{.*}}, %{{.*}} : f32
    // HOST: llvm.call_intrinsic "llvm.roundeven"(%{{.*}}) : (vector<16xf32>) -> vector<16xf32>
    // HOST: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi16>
    // HOST: %[[SUMS:.*]]:2 = scf.for %[[C:.*]] = %c0{{.*}} to %c64{{.*}} step %c2{{.*}} iter_args(%[[LO:.*]] = %{{.*}}, %[[HI:.*]] = %{{.*}}) -> (vector<16xi32>, vector<16xi32>) {
    // HOST: %[[PAIR:.*]] = memref.load %[[PAIRS]][%{{.*}}] : memref<32xi32>
    // HOST: %[[FACTORS:.*]] = vector.broadcast %[[PAIR]] : i32 to vector<16xi32>
    // HOST-NOT: memref.load %arg0
    // HOST: %[[WORDS:.*]] = vector.load %arg0[%{{.*}}] : memref<?xi32>, vector<4xi32>
    // HOST: %[[WORDBYTES:.*]] = vector.bitcast %[[WORDS]] : vector<4xi32> to vector<16xi8>
    // HOST: vector.shuffle %[[WORDBYTES]], %[[WORDBYTES]] [0, 1, 8, 9, 0, 1, 8, 9, 0, 1, 8, 9, 0, 1, 8, 9, 1, 2, 9, 10,
    // HOST: %[[MASK:.*]] = arith.constant 196611 : i32
    // HOST: %[[SHIFTS:.*]] = arith.constant dense<[0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6]> : vector<16xi32>
    // HOST: arith.shrui %{{.*}}, %[[SHIFTS]] : vector<16xi32>
    // HOST: vector.shuffle %[[WORDBYTES]], %[[WORDBYTES]] [4, 5, 12, 13, 4, 5, 12, 13,
    // HOST-NOT: arith.shli
    // HOST-NOT: arith.ori
    // HOST: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"(%[[LO]], %{{.*}}, %{{.*}}) : (vector<16xi32>, vector<32xi16>, vector<32xi16>) -> vector<16xi32>
    // HOST: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"(%[[HI]], %{{.*}}, %{{.*}}) : (vector<16xi32>, vector<32xi16>, vector<32xi16>) -> vector<16xi32>
    // HOST: arith.sitofp %[[SUMS]]#0 : vector<16xi32> to vector<16xf32>
    // HOST: vector.store %{{.*}}, %arg4[%{{.*}}] : memref<?xf32>, vector<16xf32>
    // HOST: vector.store %{{.*}}, %arg4[%{{.*}}] : memref<?xf32>, vector<16xf32>
    func.func @pair_rows(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %q: memref<64xf32>, %scores: memref<?xf32>, %n: index, %begin: i32, %first: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %ii = arith.index_castui %i : index to i32
        %t = arith.addi %begin, %ii : i32
        %p = arith.subi %t, %first : i32
        %block = arith.divui %p, %c32_i32 : i32
        %k = arith.remui %p, %c32_i32 : i32
        %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %base = arith.muli %block, %c64_i32 : i32
          %group = arith.addi %base, %ci : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %first_word = arith.muli %group, %c2_i32 : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %wi = arith.addi %first_word, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = tokens, group = 32>
          %qc = memref.load %q[%c] : memref<64xf32>
          %prod = arith.mulf %qc, %x : f32
          scf.reduce(%prod : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        %local = arith.subi %t, %begin : i32
        %lx = arith.index_castui %local : i32 to index
        memref.store %s, %scores[%lx] : memref<?xf32>
        scf.reduce
      }
      return
    }

    // @pair_rows with a channel's words 64 apart: a pair's words are not
    // among 16 from the first one's, so each channel's codes are shifted
    // into their half as before.
    // HOST-LABEL: func.func @pair_rows_apart
    // HOST: scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c2{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xi32>, vector<16xi32>) {
    // HOST-NOT: vector.load %arg0
    // HOST: memref.load %arg0
    // HOST-NOT: vector.load %arg0
    // HOST: arith.shli %{{.*}}, %{{.*}} : vector<16xi32>
    // HOST: arith.ori %{{.*}}, %{{.*}} : vector<16xi32>
    // HOST: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
    func.func @pair_rows_apart(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %q: memref<64xf32>, %scores: memref<?xf32>, %n: index, %begin: i32, %first: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %ii = arith.index_castui %i : index to i32
        %t = arith.addi %begin, %ii : i32
        %p = arith.subi %t, %first : i32
        %block = arith.divui %p, %c32_i32 : i32
        %k = arith.remui %p, %c32_i32 : i32
        %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %base = arith.muli %block, %c64_i32 : i32
          %group = arith.addi %base, %ci : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %channel_words = arith.muli %ci, %c64_i32 : i32
          %block_words = arith.muli %block, %c2_i32 : i32
          %first_word = arith.addi %channel_words, %block_words : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %wi = arith.addi %first_word, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = tokens, group = 32>
          %qc = memref.load %q[%c] : memref<64xf32>
          %prod = arith.mulf %qc, %x : f32
          scf.reduce(%prod : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        %local = arith.subi %t, %begin : i32
        %lx = arith.index_castui %local : i32 to index
        memref.store %s, %scores[%lx] : memref<?xf32>
        scf.reduce
      }
      return
    }

  }

  module @d_value_pairs attributes {kvq.cache = @d} {
    // @code_sums on a host with i16 pair dots, its tokens in pages of 32
    // (a token's group at 2 (page row) + c / 32): the tokens run in blocks
    // of 32 from the first whose place q in its page is a multiple of 16,
    // those before one by one as f32 products, as are those after the last
    // block. Per block and group (2 of the 4 chunks of 16 channels), the
    // tokens are the lanes, 2 vectors: the weights times the slopes (the
    // scales, every second parameter: stride 2), their largest magnitude
    // and their sum with the offsets; the two groups' largest and sums are
    // reduced together, and the weights rounded to i16 against the
    // largest ([group][token]). Then per pair of tokens, one pass for the 4
    // chunks: each chunk's lanes' two codes, the first token's in the low
    // half, meet its group's two rounded weights in one vpdpwssd; the i32
    // sums go to f32 times largest / 32767, plus the offsets' sum. A code
    // is (word >> 2l) & 3 in lane l, the word the lanes' own: the two
    // tokens' words of the 4 chunks are one byte vector (chunk c's word at
    // 2 (page row) + c: a vector load a token), and each chunk's pairs of
    // codes one byte shuffle, shift and mask. The pass runs 16
    // tokens at a time (a vector of them, in one page): their page's row,
    // which they share, is found once for them.
    // HOST-LABEL: func.func @code_sums_on_pairs
    // HOST: %[[BYTES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xi8>
    // HOST: %[[ROUNDED:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<128xi8> to memref<64xi16>
    // HOST: %[[PAIRS:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<128xi8> to memref<32xi32>
    // HOST: scf.for %[[C:.*]] = %c0{{.*}} to %c64{{.*}} step %c64{{.*}} {
    // HOST: %[[K:.*]] = arith.subi %{{.*}}, %arg7 : i32
    // HOST: %[[KX:.*]] = arith.index_castui %[[K]] : i32 to index
    // HOST: %[[MOD:.*]] = arith.remui %[[KX]], %c16{{.*}} : index
    // HOST: %[[UP:.*]] = arith.subi %c16{{.*}}, %[[MOD]] : index
    // HOST: %[[PEEL:.*]] = arith.remui %[[UP]], %c16{{.*}} : index
    // HOST: %[[START:.*]] = arith.minui %[[PEEL]], %arg5 : index
    // HOST: %[[END:.*]] = arith.addi %[[START]], %{{.*}} : index
    // HOST: %[[HEAD:.*]]:4 = scf.for %{{.*}} = %c0{{.*}} to %[[START]] step %c1{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
    // HOST: %[[BLOCKS:.*]]:4 = scf.for %[[FIRST:.*]] = %[[START]] to %[[END]] step %c32{{.*}} iter_args(%{{.*}} = %[[HEAD]]#0, %{{.*}} = %[[HEAD]]#1, %{{.*}} = %[[HEAD]]#2, %{{.*}} = %[[HEAD]]#3)
    // HOST: vector.maskedload %arg1[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, vector<32xi1>, vector<32xf32> into vector<32xf32>
    // HOST: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<31xf32>, vector<31xf32>
    // HOST: vector.load %arg3[%{{.*}}] : memref<?xf32>, vector<16xf32>
    // HOST: llvm.call_intrinsic "llvm.fabs"(%{{.*}}) : (vector<16xf32>) -> vector<16xf32>
    // HOST: vector.extract %{{.*}}[1] : f32 from vector<2xf32>
    // HOST: vector.extract %{{.*}}[1] : f32 from vector<2xf32>
    // HOST: llvm.call_intrinsic "llvm.roundeven"(%{{.*}}) : (vector<16xf32>) -> vector<16xf32>
    // HOST: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi16>
    // HOST: vector.store %{{.*}}, %[[ROUNDED]][%{{.*}}] : memref<64xi16>, vector<16xi16>
    // HOST: %[[DOTS:.*]]:4 = scf.for %{{.*}} = %c0{{.*}} to %c32{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>) {
    // HOST: %[[PAGE:.*]] = arith.divui %{{.*}}, %c32_i32 : i32
    // HOST: %[[PAGEROW:.*]] = arith.muli %[[PAGE]], %c64_i32 : i32
    // HOST: scf.for %{{.*}} = %c0{{.*}} to %c16{{.*}} step %c2{{.*}} iter_args({{.*}}) -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>) {
    // HOST-NOT: arith.divui {{.*}} : i32
    // HOST: arith.addi %[[PAGEROW]], %{{.*}} : i32
    // HOST-NOT: memref.load %arg0
    // HOST: %[[ROW0:.*]] = vector.load %arg0[%{{.*}}] : memref<?xi32>, vector<4xi32>
    // HOST-NOT: memref.load %arg0
    // HOST: %[[ROW1:.*]] = vector.load %arg0[%{{.*}}] : memref<?xi32>, vector<4xi32>
    // HOST: %[[WORDS:.*]] = vector.shuffle %[[ROW0]], %[[ROW1]] [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xi32>, vector<4xi32>
    // HOST: %[[WORDBYTES:.*]] = vector.bitcast %[[WORDS]] : vector<8xi32> to vector<32xi8>
    // HOST: %[[PAIR:.*]] = vector.shuffle %[[WORDBYTES]], %[[WORDBYTES]] [0, 1, 16, 17, 0, 1, 16, 17, 0, 1, 16, 17, 0, 1, 16, 17, 1, 2, 17, 18, {{.*}}, 3, 4, 19, 20] : vector<32xi8>, vector<32xi8>
    // HOST: %[[PAIRWORDS:.*]] = vector.bitcast %[[PAIR]] : vector<64xi8> to vector<16xi32>
    // HOST: %[[MASK:.*]] = vector.broadcast %c196611_i32{{.*}} : i32 to vector<16xi32>
    // HOST: %[[SHIFTED:.*]] = arith.shrui %[[PAIRWORDS]], %{{.*}} : vector<16xi32>
    // HOST: arith.andi %[[SHIFTED]], %[[MASK]] : vector<16xi32>
    // HOST-COUNT-3: vector.shuffle %[[WORDBYTES]], %[[WORDBYTES]]
    // HOST-NOT: arith.shli
    // HOST: memref.load %[[PAIRS]][%{{.*}}] : memref<32xi32>
    // HOST: memref.load %[[PAIRS]][%{{.*}}] : memref<32xi32>
    // HOST-COUNT-4: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"
    // HOST: arith.sitofp %[[DOTS]]#0 : vector<16xi32> to vector<16xf32>
    // HOST: scf.for %{{.*}} = %[[END]] to %arg5 step %c1{{.*}} iter_args(%{{.*}} = %[[BLOCKS]]#0,
    // HOST: vector.store %{{.*}}, %arg4[%[[C]]] : memref<64xf32>, vector<16xf32>
    func.func @code_sums_on_pairs(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %p: memref<?xf32>, %o: memref<64xf32>, %n: index, %begin: i32, %first: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
        %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %ii = arith.index_castui %i : index to i32
          %t = arith.addi %begin, %ii : i32
          %q = arith.subi %t, %first : i32
          %page = arith.divui %q, %c32_i32 : i32
          %pt = arith.remui %q, %c32_i32 : i32
          %g = arith.divui %ci, %c32_i32 : i32
          %k = arith.remui %ci, %c32_i32 : i32
          %pg = arith.muli %page, %c64_i32 : i32
          %tg = arith.muli %pt, %c2_i32 : i32
          %row = arith.addi %pg, %tg : i32
          %group = arith.addi %row, %g : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %firstWord = arith.muli %group, %c2_i32 : i32
          %wi = arith.addi %firstWord, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = channels, group = 32>
          %a = memref.load %p[%i] : memref<?xf32>
          %ax = arith.mulf %a, %x : f32
          scf.reduce(%ax : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s, %o[%c] : memref<64xf32>
        scf.reduce
      }
      return
    }
  }

  module @e_quads attributes {kvq.cache = @e} {
    // @pair_rows on i8 quad dots (`vpdpbusd`): the folded query rounded to
    // i8 against 127, per 4 channels each lane's four codes, the first
    // channel's in the lowest byte, meet the four rounded factors in one
    // vpdpbusd (codes unsigned, factors signed) a vector; the i32 sums go
    // to f32 times largest / 127.
    // HOST-LABEL: func.func @quad_rows
    // HOST-DAG: %[[BYTES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xi8>
    // HOST-DAG: %[[ROUNDED:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<64xi8> to memref<64xi8>
    // HOST-DAG: %[[QUADS:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<64xi8> to memref<16xi32>
    // HOST: arith.constant 1.270000e+02 : f32
    // HOST: arith.constant 0.00787401571 : f32
    // HOST: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
    // HOST: %[[SUMS:.*]]:2 = scf.for %[[C:.*]] = %c0{{.*}} to %c64{{.*}} step %c4{{.*}} iter_args(%[[LO:.*]] = %{{.*}}, %[[HI:.*]] = %{{.*}}) -> (vector<16xi32>, vector<16xi32>) {
    // HOST: %[[QUAD:.*]] = memref.load %[[QUADS]][%{{.*}}] : memref<16xi32>
    // HOST: vector.broadcast %[[QUAD]] : i32 to vector<16xi32>
    // HOST-COUNT-3: arith.shli %{{.*}}, %{{.*}} : vector<16xi32>
    // HOST: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%[[LO]], %{{.*}}, %{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
    // HOST: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%[[HI]], %{{.*}}, %{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
    // HOST: arith.sitofp %[[SUMS]]#0 : vector<16xi32> to vector<16xf32>
    func.func @quad_rows(%codes: memref<?xi32>, %scales: memref<?xf32>, %zeros: memref<?xf32>, %q: memref<64xf32>, %scores: memref<?xf32>, %n: index, %begin: i32, %first: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %c2_i32 = arith.constant 2 : i32
      %c3_i32 = arith.constant 3 : i32
      %c32_i32 = arith.constant 32 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %ii = arith.index_castui %i : index to i32
        %t = arith.addi %begin, %ii : i32
        %p = arith.subi %t, %first : i32
        %block = arith.divui %p, %c32_i32 : i32
        %k = arith.remui %p, %c32_i32 : i32
        %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
          %ci = arith.index_castui %c : index to i32
          %base = arith.muli %block, %c64_i32 : i32
          %group = arith.addi %base, %ci : i32
          %bit = arith.muli %k, %c2_i32 : i32
          %first_word = arith.muli %group, %c2_i32 : i32
          %w = arith.divui %bit, %c32_i32 : i32
          %wi = arith.addi %first_word, %w : i32
          %wx = arith.index_castui %wi : i32 to index
          %word = memref.load %codes[%wx] : memref<?xi32>
          %shift = arith.remui %bit, %c32_i32 : i32
          %shifted = arith.shrui %word, %shift : i32
          %code = arith.andi %shifted, %c3_i32 : i32
          %gx = arith.index_castui %group : i32 to index
          %scale = memref.load %scales[%gx] : memref<?xf32>
          %zp = memref.load %zeros[%gx] : memref<?xf32>
          %x = kvq.dequantize %code, %scale, %zp : <bits = 2, mode = asym, span = tokens, group = 32>
          %qc = memref.load %q[%c] : memref<64xf32>
          %prod = arith.mulf %qc, %x : f32
          scf.reduce(%prod : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        %local = arith.subi %t, %begin : i32
        %lx = arith.index_castui %local : i32 to index
        memref.store %s, %scores[%lx] : memref<?xf32>
        scf.reduce
      }
      return
    }
  }

  module @c_tiles attributes {kvq.cache = @c} {
    // A loop over 4 groups whose iterations compute on tiles of 32: the
    // copies side by side. Each tile halved into one 16-lane register, the
    // 4 copies' maxima folded together into one vector of the copies, the
    // scalar arithmetic on it, the scalar stored at the induction variable
    // one store; the copies' codes one stream of 8 words, one store.
    // HOST-LABEL: func.func @tile_copies
    // HOST-NOT: scf.parallel
    // HOST-COUNT-4: vector.load %{{.*}} : memref<128xf32>, vector<32xf32>
    // HOST: arith.cmpf ogt, %{{.*}}, %{{.*}} : vector<16xf32>
    // HOST: %[[MAX:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 4, 8, 12] : vector<16xf32>, vector<16xf32>
    // HOST: %[[SCALE:.*]] = arith.mulf %[[MAX]], %{{.*}} : vector<4xf32>
    // HOST: vector.store %[[SCALE]], %{{.*}}[%{{.*}}] : memref<4xf32>, vector<4xf32>
    // HOST: %[[CODES:.*]] = kvq.pack %{{.*}} {bits = 2 : i32} : vector<128xi32> -> vector<8xi32>
    // HOST: vector.store %[[CODES]], %{{.*}}[%{{.*}}] : memref<8xi32>, vector<8xi32>
    // HOST-NOT: scf.parallel
    func.func @tile_copies(%x: memref<128xf32>, %scales: memref<4xf32>, %codes: memref<8xi32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %third = arith.constant 0.333333343 : f32
      scf.parallel (%g) = (%c0) to (%c4) step (%c1) {
        %at = arith.muli %g, %c32 : index
        %tile = vector.load %x[%at] : memref<128xf32>, vector<32xf32>
        %max = vector.reduction <maxnumf>, %tile fastmath<nnan> : vector<32xf32> into f32
        %scale = arith.mulf %max, %third : f32
        memref.store %scale, %scales[%g] : memref<4xf32>
        %s = vector.broadcast %scale : f32 to vector<32xf32>
        %q = arith.divf %tile, %s : vector<32xf32>
        %c = arith.fptosi %q : vector<32xf32> to vector<32xi32>
        %words = kvq.pack %c {bits = 2 : i32} : vector<32xi32> -> vector<2xi32>
        %w = arith.muli %g, %c2 : index
        vector.store %words, %codes[%w] : memref<8xi32>, vector<2xi32>
        scf.reduce
      }
      return
    }

    // A reduction that may see NaN (no nnan) is each copy's own, its
    // results gathered into the copies' vector.
    // HOST-LABEL: func.func @own_reductions
    // HOST-NOT: scf.parallel
    // HOST-COUNT-2: vector.reduction <maxnumf>, %{{.*}} : vector<16xf32> into f32
    // HOST: vector.from_elements %{{.*}}, %{{.*}} : vector<2xf32>
    // HOST: vector.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<2xf32>, vector<2xf32>
    func.func @own_reductions(%x: memref<32xf32>, %out: memref<2xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c16 = arith.constant 16 : index
      scf.parallel (%g) = (%c0) to (%c2) step (%c1) {
        %at = arith.muli %g, %c16 : index
        %tile = vector.load %x[%at] : memref<32xf32>, vector<16xf32>
        %max = vector.reduction <maxnumf>, %tile : vector<16xf32> into f32
        memref.store %max, %out[%g] : memref<2xf32>
        scf.reduce
      }
      return
    }

    // An iteration whose scalar is stored elsewhere than at the induction
    // variable, or more than 8 iterations: left alone.
    // HOST-LABEL: func.func @scattered
    // HOST: scf.parallel
    // HOST-LABEL: func.func @many
    // HOST: scf.parallel
    func.func @scattered(%x: memref<32xf32>, %out: memref<4xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c16 = arith.constant 16 : index
      scf.parallel (%g) = (%c0) to (%c2) step (%c1) {
        %at = arith.muli %g, %c16 : index
        %tile = vector.load %x[%at] : memref<32xf32>, vector<16xf32>
        %max = vector.reduction <maxnumf>, %tile fastmath<nnan> : vector<16xf32> into f32
        %place = arith.muli %g, %c2 : index
        memref.store %max, %out[%place] : memref<4xf32>
        scf.reduce
      }
      return
    }
    func.func @many(%x: memref<144xf32>, %out: memref<9xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9 = arith.constant 9 : index
      %c16 = arith.constant 16 : index
      scf.parallel (%g) = (%c0) to (%c9) step (%c1) {
        %at = arith.muli %g, %c16 : index
        %tile = vector.load %x[%at] : memref<144xf32>, vector<16xf32>
        %max = vector.reduction <maxnumf>, %tile fastmath<nnan> : vector<16xf32> into f32
        memref.store %max, %out[%g] : memref<9xf32>
        scf.reduce
      }
      return
    }
  }

  gpu.module @c_kernels attributes {kvq.cache = @c} {
    // Each iteration keeps to its element: the steps run inside each
    // thread's loop, one barrier at the end.
    // DEVICE-LABEL: gpu.func @own
    // DEVICE: %[[T:.*]] = gpu.thread_id x
    // DEVICE: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // DEVICE-NEXT: scf.for
    // DEVICE: memref.load %{{.*}}[%[[C]]]
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%[[C]]]
    // DEVICE: }
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @own(%m: memref<64xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.0 : f32
      scf.for %t = %c0 to %n step %c1 {
        scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
          %x = memref.load %m[%c] : memref<64xf32>
          %y = arith.addf %x, %one : f32
          memref.store %y, %m[%c] : memref<64xf32>
          scf.reduce
        }
      }
      gpu.return
    }

    // Every iteration writes element 0, which the next step reads: the
    // steps stay outside, a barrier after each.
    // DEVICE-LABEL: gpu.func @shared
    // DEVICE: scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // DEVICE: gpu.thread_id x
    // DEVICE: scf.for
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<64xf32>
    // DEVICE: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: }
    gpu.func @shared(%m: memref<64xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %t = %c0 to %n step %c1 {
        scf.parallel (%c) = (%c0) to (%c64) step (%c1) {
          %x = memref.load %m[%c] : memref<64xf32>
          memref.store %x, %m[%c0] : memref<64xf32>
          scf.reduce
        }
      }
      gpu.return
    }

    // A parallel loop over the rows of another, with only the row's
    // addresses between them: one loop over both, one barrier.
    // DEVICE-LABEL: gpu.func @nested
    // DEVICE: %[[T:.*]] = gpu.thread_id x
    // DEVICE: scf.for %[[I:.*]] = %{{.*}} to %c128{{.*}} step %{{.*}} {
    // DEVICE-NEXT: %[[ROW:.*]] = arith.divui %[[I]], %c32{{.*}} : index
    // DEVICE-NEXT: %[[COL:.*]] = arith.remui %[[I]], %c32{{.*}} : index
    // DEVICE-NEXT: %[[AT:.*]] = arith.muli %[[ROW]], %{{.*}} : index
    // DEVICE-NEXT: %[[VIEW:.*]] = memref.subview %{{.*}}[%[[AT]]] [32] [1]
    // DEVICE-NEXT: memref.store %{{.*}}, %[[VIEW]][%[[COL]]]
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @nested(%m: memref<128xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%t) = (%c0) to (%c4) step (%c1) {
        %at = arith.muli %t, %c32 : index
        %row = memref.subview %m[%at] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
        scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
          memref.store %one, %row[%c] : memref<32xf32, strided<[1], offset: ?>>
          scf.reduce
        }
        scf.reduce
      }
      gpu.return
    }

    // A row that picks one of two loops over its columns keeps its choice
    // around the two bodies.
    // DEVICE-LABEL: gpu.func @nested_choice
    // DEVICE: scf.for %[[I:.*]] = %{{.*}} to %c128{{.*}} step %{{.*}} {
    // DEVICE-NEXT: %[[ROW:.*]] = arith.divui %[[I]], %c32{{.*}} : index
    // DEVICE-NEXT: %[[COL:.*]] = arith.remui %[[I]], %c32{{.*}} : index
    // DEVICE-NEXT: %[[EVEN:.*]] = arith.remui %[[ROW]], %{{.*}} : index
    // DEVICE-NEXT: %[[PICK:.*]] = arith.cmpi eq, %[[EVEN]], %{{.*}} : index
    // DEVICE-NEXT: scf.if %[[PICK]] {
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%[[COL]]]
    // DEVICE-NEXT: } else {
    // DEVICE: memref.store %{{.*}}, %{{.*}}[%[[COL]]]
    // DEVICE-NEXT: }
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    gpu.func @nested_choice(%m: memref<128xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %one = arith.constant 1.0 : f32
      %two = arith.constant 2.0 : f32
      scf.parallel (%t) = (%c0) to (%c4) step (%c1) {
        %even = arith.remui %t, %c2 : index
        %pick = arith.cmpi eq, %even, %c0 : index
        scf.if %pick {
          scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
            memref.store %one, %m[%c] : memref<128xf32>
            scf.reduce
          }
        } else {
          %c32b = arith.constant 32 : index
          scf.parallel (%c) = (%c0) to (%c32b) step (%c1) {
            memref.store %two, %m[%c] : memref<128xf32>
            scf.reduce
          }
        }
        scf.reduce
      }
      gpu.return
    }

    // A reduction over a count known at run time: each thread's share from
    // the identity, gpu.all_reduce of the shares with the combiner (every
    // thread gets the result), then the initial value; the barrier after.
    // DEVICE-LABEL: gpu.func @block_max
    // DEVICE: gpu.thread_id x
    // DEVICE: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
    // DEVICE: %[[SHARE:.*]] = scf.for %[[I:.*]] = %{{.*}} to %arg1 step %{{.*}} iter_args(%[[M:.*]] = %[[NEG]]) -> (f32) {
    // DEVICE: %[[X:.*]] = memref.load %{{.*}}[%[[I]]]
    // DEVICE: %[[GT:.*]] = arith.cmpf ogt, %[[M]], %[[X]] : f32
    // DEVICE: %[[M1:.*]] = arith.select %[[GT]], %[[M]], %[[X]] : f32
    // DEVICE: scf.yield %[[M1]]
    // DEVICE: %[[ALL:.*]] = gpu.all_reduce %[[SHARE]] uniform {
    // DEVICE: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
    // DEVICE: %[[GT2:.*]] = arith.cmpf ogt, %[[A]], %[[B]] : f32
    // DEVICE: %[[AB:.*]] = arith.select %[[GT2]], %[[A]], %[[B]] : f32
    // DEVICE: gpu.yield %[[AB]] : f32
    // DEVICE: } : (f32) -> f32
    // DEVICE: %[[GT3:.*]] = arith.cmpf ogt, %arg2, %[[ALL]] : f32
    // DEVICE: %[[R:.*]] = arith.select %[[GT3]], %arg2, %[[ALL]] : f32
    // DEVICE: gpu.barrier
    // DEVICE: memref.store %[[R]]
    gpu.func @block_max(%m: memref<?xf32>, %n: index, %m0: f32) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%m0) -> f32 {
        %x = memref.load %m[%i] : memref<?xf32>
        scf.reduce(%x : f32) {
        ^bb0(%a: f32, %b: f32):
          %gt = arith.cmpf ogt, %a, %b : f32
          %max = arith.select %gt, %a, %b : f32
          scf.reduce.return %max : f32
        }
      }
      memref.store %r, %m[%c0] : memref<?xf32>
      gpu.return
    }

    // A parallel loop inside another is its thread's own: the outer loop
    // over the block's threads, the inner one in order in its thread, its
    // sums scalars from the loop's initial values, no gpu.all_reduce and
    // one barrier, after the outer loop. Its rows are known to be 16-byte
    // aligned: a step takes 8 channels, each row one vector.load (8 f16 of
    // keys, 8 f32 of each query row), the channels its lanes in order.
    // DEVICE-LABEL: gpu.func @token_dots
    // DEVICE: gpu.thread_id x
    // DEVICE: scf.for %[[T:.*]] = %{{.*}} to %arg3 step %{{.*}} {
    // DEVICE: %[[ROW:.*]] = memref.subview
    // DEVICE: %[[D:.*]]:2 = scf.for %[[C:.*]] = %c0{{.*}} to %c16{{.*}} step %c8{{.*}} iter_args(%[[A:.*]] = %cst{{.*}}, %[[B:.*]] = %cst{{.*}}) -> (f32, f32) {
    // DEVICE-NEXT: %[[K:.*]] = vector.load %[[ROW]][%[[C]]] {alignment = 16 : i64} : {{.*}}, vector<8xf16>
    // DEVICE-NEXT: %[[QA:.*]] = vector.load %{{.*}}[%[[C]]] {alignment = 16 : i64} : {{.*}}, vector<8xf32>
    // DEVICE-NEXT: %[[QB:.*]] = vector.load %{{.*}}[%[[C]]] {alignment = 16 : i64} : {{.*}}, vector<8xf32>
    // DEVICE-NEXT: %[[K0:.*]] = vector.extract %[[K]][0]
    // DEVICE-NEXT: %[[QA0:.*]] = vector.extract %[[QA]][0]
    // DEVICE-NEXT: %[[QB0:.*]] = vector.extract %[[QB]][0]
    // DEVICE-NEXT: %[[K0F:.*]] = arith.extf %[[K0]]
    // DEVICE-NEXT: %[[PA:.*]] = arith.mulf %[[QA0]], %[[K0F]]
    // DEVICE-NEXT: %[[PB:.*]] = arith.mulf %[[QB0]], %[[K0F]]
    // DEVICE-NEXT: %[[A1:.*]] = arith.addf %[[A]], %[[PA]]
    // DEVICE-NEXT: %[[B1:.*]] = arith.addf %[[B]], %[[PB]]
    // DEVICE-NEXT: vector.extract %[[K]][1]
    // DEVICE: vector.extract %[[K]][7]
    // DEVICE: scf.yield
    // DEVICE-NEXT: }
    // DEVICE-NEXT: memref.store %[[D]]#0, %{{.*}}[%[[T]]]
    // DEVICE: memref.store %[[D]]#1
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @token_dots(%k: memref<?xf16>, %q: memref<32xf32>, %s: memref<?xf32>, %n: index) kernel {
      %keys = memref.assume_alignment %k, 16 : memref<?xf16>
      %queries = memref.assume_alignment %q, 16 : memref<32xf32>
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
      gpu.return
    }

    // Rows of no known alignment: one element an iteration.
    // DEVICE-LABEL: gpu.func @unaligned_dots
    // DEVICE: scf.for %{{.*}} = %{{.*}} to %arg3 step %{{.*}} {
    // DEVICE: scf.for %[[C:.*]] = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args(
    // DEVICE-NEXT: memref.load %{{.*}}[%[[C]]]
    // DEVICE-NOT: vector.load
    // DEVICE: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @unaligned_dots(%keys: memref<?xf16>, %queries: memref<32xf32>, %s: memref<?xf32>, %n: index) kernel {
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
      gpu.return
    }

    // A reduction inside a parallel loop of 4 iterations (4 heads'
    // statistics over a split's tokens): each head a team of 32 threads,
    // the workers' shares from the identity, a butterfly of shuffles, the
    // initial value, and worker 0 storing; one barrier after the loop.
    // DEVICE-LABEL: gpu.func @head_sums
    // DEVICE: %[[T:.*]] = gpu.thread_id x
    // DEVICE: %[[HEAD:.*]] = arith.divui %[[T]], %c32
    // DEVICE: %[[WORKER:.*]] = arith.remui %[[T]], %c32
    // DEVICE: scf.for %[[R:.*]] = %[[HEAD]] to %c4{{.*}} step %c4{{.*}} {
    // DEVICE: %[[FIRST:.*]] = arith.addi %c0{{.*}}, %{{.*}} : index
    // DEVICE: %[[STRIDE:.*]] = arith.muli %c1{{.*}}, %c32{{.*}} : index
    // DEVICE: %[[SHARE:.*]] = scf.for %{{.*}} = %[[FIRST]] to %arg1 step %[[STRIDE]] iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
    // DEVICE: %[[X16:.*]], %{{.*}} = gpu.shuffle xor %[[SHARE]], %c16_i32, %c32_i32 : f32
    // DEVICE-NEXT: %[[S16:.*]] = arith.addf %[[SHARE]], %[[X16]] : f32
    // DEVICE: gpu.shuffle xor %[[S16]], %c8_i32
    // DEVICE: gpu.shuffle xor %{{.*}}, %c4_i32
    // DEVICE: gpu.shuffle xor %{{.*}}, %c2_i32
    // DEVICE: gpu.shuffle xor %{{.*}}, %c1_i32
    // DEVICE: %[[ALL:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
    // DEVICE-NEXT: %[[SUM:.*]] = arith.addf %arg2, %[[ALL]] : f32
    // DEVICE: %[[LEAD:.*]] = arith.cmpi eq, %[[WORKER]], %c0{{.*}} : index
    // DEVICE-NEXT: scf.if %[[LEAD]] {
    // DEVICE-NEXT: memref.store %[[SUM]], %{{.*}}[%[[R]]]
    // DEVICE-NEXT: }
    // DEVICE-NEXT: }
    // DEVICE-NEXT: gpu.barrier
    // DEVICE-NOT: gpu.all_reduce
    gpu.func @head_sums(%x: memref<?xf32>, %n: index, %s0: f32, %out: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
        %base = arith.muli %r, %n : index
        %s = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%s0) -> f32 {
          %i = arith.addi %base, %t : index
          %v = memref.load %x[%i] : memref<?xf32>
          scf.reduce(%v : f32) {
          ^bb0(%a: f32, %b: f32):
            %sum = arith.addf %a, %b : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s, %out[%r] : memref<4xf32>
        scf.reduce
      }
      gpu.return
    }

    // The same on the GPU: 64 channels over 128 threads, two workers a
    // channel, whose token shares one shuffle combines.
    // DEVICE-LABEL: gpu.func @value_sums
    // DEVICE: %[[WORKER:.*]] = arith.remui %{{.*}}, %c2
    // DEVICE: scf.for %[[C:.*]] = %{{.*}} to %c64{{.*}} step %c64{{.*}} {
    // DEVICE: scf.for %{{.*}} iter_args(%{{.*}} = %cst{{.*}}, %{{.*}} = %cst{{.*}}) -> (f32, f32) {
    // DEVICE: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
    // DEVICE: gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
    // DEVICE-NOT: gpu.shuffle
    // DEVICE: scf.if
    // DEVICE: gpu.barrier
    gpu.func @value_sums(%v: memref<?xf16>, %p: memref<?xf32>, %o0: memref<64xf32>, %n: index, %o1: memref<64xf32>) kernel {
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
      gpu.return
    }

    // Value rows known to be 16-byte aligned: a thread takes a run of 8
    // channels, each token's row one load of them, the reduction carrying
    // the 8 channels' sums of each head (16); the 8 runs are teams of 16
    // threads, 4 butterfly steps of each sum.
    // DEVICE-LABEL: gpu.func @value_runs
    // DEVICE: %[[WORKER:.*]] = arith.remui %{{.*}}, %c16
    // DEVICE: scf.for %[[U:.*]] = %{{.*}} to %c8{{.*}} step %c8{{.*}} {
    // DEVICE: %[[C0:.*]] = arith.muli %[[U]], %c8
    // DEVICE: scf.for %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
    // DEVICE: %[[ROW:.*]] = memref.subview
    // DEVICE-NEXT: %[[RUNLOAD:.*]] = vector.load %[[ROW]][%[[C0]]] {alignment = 16 : i64} : {{.*}}, vector<8xf16>
    // DEVICE-COUNT-64: gpu.shuffle xor
    // DEVICE-NOT: gpu.shuffle
    // DEVICE: scf.if
    // DEVICE-COUNT-16: memref.store
    // DEVICE: gpu.barrier
    gpu.func @value_runs(%values: memref<?xf16>, %p: memref<?xf32>, %o0: memref<64xf32>, %n: index, %o1: memref<64xf32>) kernel {
      %v = memref.assume_alignment %values, 16 : memref<?xf16>
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
      gpu.return
    }

    // A row whose view the inner loop makes itself: read element by element
    // in the thread's loop (its view is made there, after the loop starts).
    // DEVICE-LABEL: gpu.func @inner_view
    // DEVICE: scf.for %[[C:.*]] = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args(
    // DEVICE-NEXT: %[[ROW:.*]] = memref.assume_alignment
    // DEVICE-NEXT: memref.load %[[ROW]][%[[C]]]
    // DEVICE-NOT: vector.load
    // DEVICE: gpu.barrier
    gpu.func @inner_view(%k: memref<16xf16>, %s: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%t) = (%c0) to (%n) step (%c1) {
        %d = scf.parallel (%c) = (%c0) to (%c16) step (%c1) init (%zero) -> f32 {
          %row = memref.assume_alignment %k, 16 : memref<16xf16>
          %x = memref.load %row[%c] : memref<16xf16>
          %x32 = arith.extf %x : f16 to f32
          scf.reduce(%x32 : f32) {
          ^bb0(%l: f32, %r: f32):
            %sum = arith.addf %l, %r : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %d, %s[%t] : memref<?xf32>
        scf.reduce
      }
      gpu.return
    }

    // A reduction with a parallel loop inside it is no team's: a team's
    // workers would run the inner loop as an outermost one. The outer loop
    // is the threads', the two inside it each thread's own.
    // DEVICE-LABEL: gpu.func @three_deep
    // DEVICE: gpu.thread_id x
    // DEVICE-NOT: gpu.shuffle
    // DEVICE-NOT: gpu.all_reduce
    // DEVICE-NOT: scf.parallel
    // DEVICE: gpu.barrier
    // DEVICE-NEXT: gpu.return
    gpu.func @three_deep(%x: memref<?xf32>, %out: memref<4xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %zero = arith.constant 0.0 : f32
      scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
        %s = scf.parallel (%t) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
          %u = scf.parallel (%j) = (%c0) to (%c8) step (%c1) init (%zero) -> f32 {
            %i = arith.addi %t, %j : index
            %v = memref.load %x[%i] : memref<?xf32>
            scf.reduce(%v : f32) {
            ^bb0(%a: f32, %b: f32):
              %sum = arith.addf %a, %b : f32
              scf.reduce.return %sum : f32
            }
          }
          scf.reduce(%u : f32) {
          ^bb0(%a: f32, %b: f32):
            %sum = arith.addf %a, %b : f32
            scf.reduce.return %sum : f32
          }
        }
        memref.store %s, %out[%r] : memref<4xf32>
        scf.reduce
      }
      gpu.return
    }
  }
}
