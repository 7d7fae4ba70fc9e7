// The host code is compiled for the CPU --kvq-host-cpu names; the manifest
// records it and the x86 features the code may use, which the runtime checks
// before loading kernels.so. An unknown CPU is a located error.
// RUN: kvq-opt %s --kvq-compile=%t.v2 --kvq-host-cpu=x86-64-v2 -o /dev/null
// RUN: FileCheck %s --check-prefix=V2 < %t.v2/manifest.json
// RUN: kvq-opt %s --kvq-compile=%t.v4 --kvq-host-cpu=x86-64-v4 -o /dev/null
// RUN: FileCheck %s --check-prefix=V4 < %t.v4/manifest.json
// RUN: not kvq-opt %s --kvq-compile=%t.bad --kvq-host-cpu=pentium9 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

kvq.cache @kivi model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// V2:      "host": {
// V2-NEXT:   "cpu": "x86-64-v2",
// V2:        "sse4.2",
// V2-NOT:    "avx
// V2:      "kernels"

// V4:      "host": {
// V4-NEXT:   "cpu": "x86-64-v4",
// V4:        "avx2",
// V4:        "avx512f",
// V4:      "kernels"

// BAD: error: unknown host CPU 'pentium9' for {{.*}} (use 'native' or an LLVM CPU name such as x86-64-v3)
