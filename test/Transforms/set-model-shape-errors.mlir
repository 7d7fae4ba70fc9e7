// A shape the model attribute rejects is reported at the cache.
// RUN: not kvq-opt %s --kvq-set-model="heads=9 kv_heads=4" -o /dev/null 2>&1 | FileCheck %s
// CHECK: set-model-shape-errors.mlir:[[# @LINE + 3]]:1: error: kvq-set-model: heads (9) must be a multiple of kv_heads (4)
// RUN: not kvq-opt %s --kvq-set-model="dtype=f64" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: kvq-set-model: dtype must be f16, bf16 or f32, got 'f64'
kvq.cache @c model <layers = 2, heads = 8, kv_heads = 8, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.full_precision
  }
}
