// kvq-lower-kernels emits the forms kvq-select-forms recorded on each
// attend kernel, and fails where they are missing.
// RUN: not kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-lower-kernels -o %t.out 2>&1 | FileCheck %s
// CHECK: error: 'kvq.attend_kernel' op has no forms for the CPU: run kvq-select-forms first
kvq.cache @unselected model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
