// Each stage of kvq-compile-pipeline runs and prints alone. The stages:
//   kvq-build-kernels = kvq-assign-target, kvq.cache(kvq-expand-schedule),
//                       kvq-assign-layout, kvq-plan-kernels,
//                       kvq-select-forms, kvq-lower-kernels,
//                       kvq-instantiate-programs, kvq-running-extrema,
//                       kvq-vectorize-parallel, kvq-distribute-parallel,
//                       kvq-pipeline-loads, kvq-expand-dequantize,
//                       kvq-expand-unpack, kvq-expand-pack,
//                       kvq-attach-nvvm-targets
//   kvq-host-to-llvm  = builtin.module(any(expand-strided-metadata,
//                       convert-scf-to-cf, arith-expand), convert-to-llvm,
//                       reconcile-unrealized-casts, kvq-move-bf16-as-bits)
//   kvq-gpu-to-binary = gpu.module(any(expand-strided-metadata,
//                       convert-scf-to-cf), convert-gpu-to-nvvm,
//                       any(canonicalize, cse), reconcile-unrealized-casts),
//                       kvq-gpu-module-to-binary
// In kvq-compile-pipeline the host and GPU stages' nested pipelines are
// adjacent, so the pass manager runs them as one, side by side; inside each,
// the passes under any() run on each kernel apart, side by side too.
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout,kvq-plan-kernels)' | FileCheck %s --check-prefix=PLAN
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-build-kernels)' | FileCheck %s --check-prefix=KERNELS
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-build-kernels,kvq-host-to-llvm)' | FileCheck %s --check-prefix=LLVM
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-build-kernels{chips=sm_80},kvq-host-to-llvm)' \
// RUN:   | kvq-opt --pass-pipeline='builtin.module(kvq-gpu-to-binary)' | FileCheck %s --check-prefix=BINARY
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-compile-pipeline{host-cpu=x86-64-v3 chips=sm_80,sm_90})' | FileCheck %s --check-prefix=ALL
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq-compile-pipeline)' --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTED

kvq.cache @kivi model <layers = 2, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// The schedule is expanded first, then the kernels are declared.
// PLAN: kvq.layer 0 :
// PLAN: kvq.layer 1 :
// PLAN: kvq.flush_kernel @kivi_flush_keys_0 of @kivi keys layers [0, 1]
// PLAN: kvq.attend_kernel @kivi_attend_0 of @kivi layers [0, 1]

// Kernel IR: the cache stays; per cache, a host module and a GPU module, each
// function keeping what the manifest needs of its kernel op; the host
// function also the flush units a block of its GPU kernel moves (a value
// flush unit is a token, 2 groups of 32 channels, each a thread's task; 128
// threads x 4 loads in flight / 2 = 256; a key flush unit is 128 tokens: 4
// blocks of 32 tokens x 64 channels, 256 groups: 2). The flushes are
// programs, instantiated after the emitted kernels.
// KERNELS-LABEL: module attributes {gpu.container_module}
// KERNELS: kvq.cache @kivi
// KERNELS: module @kivi_host attributes {kvq.cache = @kivi, kvq.host_cpu = "native"}
// KERNELS: func.func @kivi_attend_0({{.*}}) attributes {kvq.kernel = {kind = "attend", layers = array<i64: 0, 1>}}
// KERNELS: func.func @kivi_flush_keys_0({{.*}}) attributes {kvq.kernel = {device_units = 2 : i64, kind = "flush", layers = array<i64: 0, 1>, tensor = "keys"}}
// KERNELS: func.func @kivi_flush_values_0({{.*}}) attributes {kvq.kernel = {device_units = 256 : i64, kind = "flush", layers = array<i64: 0, 1>, tensor = "values"}}
// KERNELS: gpu.module @kivi_kernels [#nvvm.target<O = 3, chip = "sm_80">]
// KERNELS: gpu.func @kivi_flush_keys_0({{.*}}) kernel attributes {{{.*}}kvq.kernel = {kind = "flush"
// KERNELS-NOT: kvq.dequantize

// The host module in the LLVM dialect; the GPU module is untouched.
// LLVM: module @kivi_host
// LLVM-NOT: func.func
// LLVM: llvm.func @kivi_flush_keys_0({{.*}}) attributes {kvq.kernel =
// LLVM: gpu.module @kivi_kernels
// LLVM: gpu.func @kivi_flush_keys_0(

// The GPU stage runs alone on the printed IR of the stages before it.
// BINARY: llvm.func @kivi_attend_0(
// BINARY: gpu.binary @kivi_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80">, {{.*}}assembly = "{{.*}}.target sm_80
// BINARY-NOT: gpu.module

// ALL: module @kivi_host attributes {kvq.cache = @kivi, kvq.host_cpu = "x86-64-v3"}
// One object for the oldest chip: its PTX serves both.
// ALL: gpu.binary @kivi_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80">, {{[^]]*}}]
// ALL-NOT: sm_90">

// The host module's and the GPU module's lowerings are one nested pipeline
// stage of the pass manager (an adaptor over both), with nothing at module
// level between them.
// NESTED: kvq-attach-nvvm-targets,
// NESTED-NEXT: builtin.module(
// NESTED-NEXT: any(
// NESTED-NEXT: expand-strided-metadata,
// NESTED-NEXT: convert-scf-to-cf
// NESTED-NEXT: arith-expand
// NESTED-NEXT: ),
// NESTED-NEXT: convert-to-llvm
// NESTED: kvq-move-bf16-as-bits
// NESTED-NEXT: ),
// NESTED-NEXT: gpu.module(
// NESTED-NEXT: any(
// NESTED-NEXT: expand-strided-metadata,
// NESTED-NEXT: convert-scf-to-cf
// NESTED-NEXT: convert-nvgpu-to-nvvm
// NESTED-NEXT: ),
// NESTED-NEXT: convert-gpu-to-nvvm
// NESTED-NEXT: any(
// NESTED-NEXT: canonicalize
// NESTED-NEXT: cse
// NESTED-NEXT: ),
// NESTED-NEXT: reconcile-unrealized-casts
// NESTED-NEXT: ),
// NESTED-NEXT: kvq-gpu-module-to-binary
