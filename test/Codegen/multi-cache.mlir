// Several caches in one module: one artifact each, in DIR/<cache name>, each
// with its own kernels only (names start with the cache's, so the host
// objects link into one program).
// RUN: rm -rf %t && kvq-opt %s --kvq-compile=%t -o /dev/null
// RUN: FileCheck %s --check-prefix=A --input-file=%t/a/manifest.json
// RUN: FileCheck %s --check-prefix=B --input-file=%t/b/manifest.json
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/b/kernels.sm_80.ptx
// RUN: nm %t/a/kernels.o | FileCheck %s --check-prefix=SYMS

kvq.cache @a model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
kvq.cache @b model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// A: "name": "a"
// A-NOT: "b_
// B: "name": "b"
// B-NOT: "a_
// PTX: .entry b_attend_0
// PTX-NOT: .entry a_
// SYMS: T a_attend_0
// SYMS-NOT: {{ }}b_
