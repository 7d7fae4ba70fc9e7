// A kernel whose cache cannot be laid out fails the pass (and kvq-opt) with
// the layout's diagnostic; the kernel op is not left in the output.
// RUN: not kvq-opt %s --kvq-assign-layout --kvq-select-forms --kvq-lower-kernels -o %t.out 2>&1 | FileCheck %s

// CHECK: error: 'kvq.cache' op kvq-compile supports outlier pools only when keys and values have the same window
// CHECK-NOT: kvq.attend_kernel @a
kvq.cache @pool model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 64, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}
kvq.attend_kernel @a of @pool layers [0, 1]
