// RUN: kvq-opt %s -split-input-file -verify-diagnostics --kvq-set-model="layers=30 heads=9 kv_heads=3 head_dim=64" -o /dev/null

kvq.cache @wide_groups model <layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op channel groups of 128 do not fit head_dim 64: use a group that divides it (group = 64), or clamp-groups=true for one group per head}}
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

kvq.cache @odd_groups model <layers = 32, heads = 32, kv_heads = 8, head_dim = 96, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op channel groups of 48 do not fit head_dim 64: use a group that divides it (group = 16)}}
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 48>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 32 : #kvq.full_precision
  }
}

// -----

kvq.cache @calibrated model <layers = 1, heads = 1, kv_heads = 1, head_dim = 4, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op has tables calibrated for the old model (channel reorder or per-group clipping): recalibrate them for the new one instead of setting the model}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 2, clip = dense<[[[0.9, 0.8]]]> : tensor<1x1x2xf32>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @expanded model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layer' op kvq-set-model needs the schedule as written (kvq.layers ranges): set the model before kvq-expand-schedule}}
    kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

kvq.cache @rope model <layers = 1, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    // expected-error @+1 {{'kvq.layers' op pre_rope rotates 96 dimensions, more than head_dim 64: state the new model's rotary dimensions}}
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 1, pre_rope = #kvq.rope<theta = 10000.0, dims = 96, style = half>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
