// RUN: kvq-opt %s --kvq-report-bits -verify-diagnostics -o /dev/null

// The verifier accepts an elided table (it may be loaded later); a pass that
// needs its contents rejects it.
kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op reorder tables must hold i32 or i64 values, with their resource data present}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2,
        reorder = #kvq.reorder<perm = dense_resource<__elided__> : tensor<1x1x4xi32>, sizes = dense<[[[2, 2]]]> : tensor<1x1x2xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
