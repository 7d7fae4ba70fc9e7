// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=attend-programs=false | FileCheck %s --check-prefix=GPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels=attend-programs=false | FileCheck %s --check-prefix=CPU
// The emitted fp16 attend kernel (`attend-programs=false`; by default it
// is the attend program, whose loops kvq-pipeline-loads keeps in flight:
// pipeline-loads.mlir, attend-program.mlir).

// The GPU's streaming loops emit KernelTarget::getLoadsInFlight() = 4
// iterations at a time (KernelBuilder::forLoopInFlight), so that a thread
// has four 16-byte row loads in flight before it waits on the first: a
// chunk loop over a key row (8 channels a chunk, 32 an iteration) and a
// token loop over value rows (a worker's tokens 8 apart, 32 an iteration),
// each followed by the loop of the indices left over, one at a time. The
// CPU's out-of-order cores run ahead by themselves: their loops step by one.
kvq.cache @fp model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// GPU-LABEL: gpu.func @fp_attend_0(
// GPU: scf.for %{{.*}} step %c32_i32{{.*}} iter_args
// GPU-NOT: scf.yield
// GPU: -> vector<8xf16>
// GPU-NOT: scf.yield
// GPU: -> vector<8xf16>
// GPU-NOT: scf.yield
// GPU: -> vector<8xf16>
// GPU-NOT: scf.yield
// GPU: -> vector<8xf16>
// GPU-NOT: -> vector<8xf16>
// GPU: scf.yield
// GPU-NEXT: }
// GPU: scf.for %{{.*}} step %c8_i32{{.*}} iter_args
// GPU-NOT: scf.yield
// GPU: -> vector<8xf16>
// GPU-NOT: -> vector<8xf16>
// GPU: scf.yield
// GPU: gpu.return

// CPU-LABEL: func.func @fp_attend_0(
// CPU-NOT: step %c32_i32
// CPU: return

// KIVI-2's span=channels values on the matrix unit: a warp's 16-token steps
// load the next step's page memory before the current step's arithmetic
// (sumWarpSharePipelined). The step loop carries, beside the 36 sums (8
// tiles of 4 and the offsets' 4), a thread's four tokens' code word, scale
// bits and zero-point bits: loaded one step ahead, converted in the step
// that uses them.
kvq.cache @kivi model <layers = 1, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// GPU-LABEL: gpu.func @kivi_attend_0(
// GPU: scf.for {{.*}} -> ({{(f32, )+}}i32, i16, i16, i32, i16, i16, i32, i16, i16, i32, i16, i16)
// GPU: arith.bitcast %arg{{[0-9]+}} : i16 to f16
// GPU: nvvm.mma.sync
// GPU: scf.yield
