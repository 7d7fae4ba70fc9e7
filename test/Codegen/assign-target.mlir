// kvq-assign-target attaches the target every later stage reads; a cache
// that states its own keeps it.
// The CPU kernels' vector lanes are read off the host CPU's features: 8 f32
// lanes with AVX2 (x86-64-v3), 4 with SSE (x86-64-v2), 16 (the default,
// not printed) with AVX-512; the dot unit `cpu_dot` with AVX-512 VNNI; the
// GPU's matrix unit `gpu_matrix` from the chips (m16n8k16 from sm_80).
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=x86-64-v3 chips=sm_90" | FileCheck %s
// CHECK: kvq.cache @defaults {{.*}}kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_90"], warp_size = 32, block_threads = 128, split_tokens = 512, vector_lanes = 8, gpu_matrix = <m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>
// CHECK: kvq.cache @custom {{.*}}kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 256, split_tokens = 128>

// RUN: kvq-opt %s --kvq-assign-target="host-cpu=x86-64-v2" | FileCheck %s --check-prefix=SSE
// SSE: kvq.cache @defaults {{.*}}split_tokens = 512, vector_lanes = 4, gpu_matrix
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=skylake-avx512" | FileCheck %s --check-prefix=AVX512
// AVX512: kvq.cache @defaults {{.*}}host_cpu = "skylake-avx512"{{.*}}split_tokens = 512, gpu_matrix
// AVX-512 VNNI (and BW) adds 16-bit integer products in pairs: vpdpwssd.
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=icelake-server" | FileCheck %s --check-prefix=VNNI
// VNNI: kvq.cache @defaults {{.*}}host_cpu = "icelake-server"{{.*}}split_tokens = 512, cpu_dot = <m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, gpu_matrix
// With 8-bit factors (dot-factor-bits=8) the unit is vpdpbusd: unsigned
// and signed bytes in fours. Without VNNI there is no unit at either width;
// other widths are an error of the pass.
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=icelake-server dot-factor-bits=8" | FileCheck %s --check-prefix=VNNI8
// VNNI8: kvq.cache @defaults {{.*}}host_cpu = "icelake-server"{{.*}}split_tokens = 512, cpu_dot = <m = 16, n = 1, k = 4, operands = i8, accumulator = i32>, gpu_matrix
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=skylake-avx512 dot-factor-bits=8" | FileCheck %s --check-prefix=AVX512
// RUN: not kvq-opt %s --kvq-assign-target="host-cpu=icelake-server dot-factor-bits=4" 2>&1 | FileCheck %s --check-prefix=BITS
// BITS: error: kvq-assign-target: dot-factor-bits must be 16 or 8, not 4
// Chips before sm_80 have no m16n8k16: no gpu_matrix.
// RUN: kvq-opt %s --kvq-assign-target="host-cpu=x86-64-v3 chips=sm_75,sm_90" | FileCheck %s --check-prefix=TURING
// TURING: kvq.cache @defaults {{.*}}chips = ["sm_75", "sm_90"]{{.*}}vector_lanes = 8>
// An unknown CPU is an error of the pass.
// RUN: not kvq-opt %s --kvq-assign-target="host-cpu=no-such-cpu" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown host CPU 'no-such-cpu'

// The host's split capacity is its own (2048 unless stated), a whole number
// of split granules (1000 -> 992 at 32); the host code's score buffer holds
// that many tokens a head, the GPU's the GPU's split size.
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-assign-target,kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s --check-prefix=LAYOUT
// LAYOUT: kvq.cache @defaults {{.*}}#kvq.layout<page_tokens = 128, split_tokens = 512, split_granule = 32,
// LAYOUT: kvq.cache @host_split {{.*}}#kvq.layout<page_tokens = 128, split_tokens = 256, host_split_tokens = 992, split_granule = 32,
// LAYOUT-SAME: host_split_tokens = 1000
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-build-kernels)' | FileCheck %s --check-prefix=BUFFERS
// BUFFERS-LABEL: func.func @host_split_attend_0(
// BUFFERS: llvm.alloca %c15872_i64 x i8
// BUFFERS: llvm.mlir.global internal @host_split_attend_0_shared0() {{.*}} : !llvm.array<4096 x i8>

// The layout takes the split size, the GPU kernels the block size, the
// manifest both; the PTX assembles with them.
// RUN: rm -rf %t && kvq-opt %s --kvq-compile=%t -o /dev/null
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/custom/manifest.json
// MANIFEST: "block": [
// MANIFEST-NEXT: 256,
// MANIFEST: "split_tokens": 128,
// RUN: FileCheck %s --check-prefix=DEFAULTS < %t/defaults/manifest.json
// DEFAULTS: "block": [
// DEFAULTS-NEXT: 128,
// DEFAULTS: "split_tokens": 512,
// RUN: FileCheck %s --check-prefix=DEFAULT-HOST < %t/defaults/manifest.json
// DEFAULT-HOST: "features": [
// DEFAULT-HOST: "split_tokens": 2048
// RUN: FileCheck %s --check-prefix=HOST-SPLIT < %t/host_split/manifest.json
// HOST-SPLIT: "features": [
// HOST-SPLIT: "split_tokens": 992
// HOST-SPLIT: "split_granule": 32,
// HOST-SPLIT: "split_tokens": 256,
// RUN: ls %t/custom | FileCheck %s --check-prefix=CHIPS
// CHIPS-NOT: sm_90
// CHIPS: kernels.sm_80.ptx
// CHIPS-NOT: sm_90

kvq.cache @defaults model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

kvq.cache @custom model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 256, split_tokens = 128>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

kvq.cache @host_split model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, host_split_tokens = 1000>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
