// Specs using a feature the code generator does not support yet are
// rejected with a diagnostic naming it, never miscompiled.
// RUN: kvq-opt %s -split-input-file -verify-diagnostics --kvq-compile=%t -o /dev/null

kvq.cache @sharing model <layers = 2, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  // expected-error @+1 {{'kvq.values' op kvq-compile supports code sharing only with an earlier layer; layer 0 reuses layer 1}}
  kvq.values window <recent = 129, flush = 1> share <from = 0, owner = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32>
  }
}

// -----

// OTT's tracker takes a token out of keys and values at the same flush.
// expected-error @+1 {{'kvq.cache' op kvq-compile supports outlier pools only when keys and values have the same window, got #kvq.window<recent = 32, flush = 128> and #kvq.window<recent = 64, flush = 128>}}
kvq.cache @pool_windows model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 64, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}

// -----

// A sharing layer would read codes its owner computed from other
// replacements, at slots it does not mask.
// expected-error @+1 {{'kvq.cache' op kvq-compile does not support outlier pools in code-sharing layers; layer 1 reuses layer 0}}
kvq.cache @pool_sharing model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 1> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128>
  }
  kvq.values window <recent = 32, flush = 128> share <from = 0> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 128>
  }
}

// -----

kvq.cache @rope model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  // expected-error @+1 {{'kvq.keys' op kvq-compile does not support pre-RoPE keys with key normalisation yet}}
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, key_norm = true, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Pool entries are attended as stored, so they would not be rotated.
// expected-error @+1 {{'kvq.cache' op kvq-compile does not support outlier pools with pre-RoPE keys (layer 1)}}
kvq.cache @pool_rope model <layers = 2, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 pool <capacity = 3, extra = 32, first_layer = 1> {
  kvq.keys window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128, pre_rope = #kvq.rope<theta = 10000.0, dims = 128, style = half>>
  }
  kvq.values window <recent = 32, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128>
  }
}

// -----

// A rotated flush holds a group of tokens in block-local memory (32 KiB):
// 128 tokens of 128 channels do not fit.
kvq.cache @rotated model <layers = 1, heads = 1, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  // expected-error @+1 {{'kvq.keys' op kvq-compile does not support rotate = hadamard with span = tokens groups of more than 8192 elements yet}}
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 128, rotate = hadamard>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
