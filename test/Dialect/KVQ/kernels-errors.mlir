// RUN: kvq-opt %s -split-input-file -verify-diagnostics -o /dev/null

kvq.cache @c model <layers = 2, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
    kvq.layers 1 to 2 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
// expected-error @+1 {{'kvq.flush_kernel' op layers 0 and 1 have different schemes; one kernel serves one scheme}}
kvq.flush_kernel @fv of @c values layers [0, 1]

// -----

kvq.cache @c model <layers = 2, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 2 : #kvq.full_precision
  }
}
// expected-error @+1 {{'kvq.attend_kernel' op layer 2 is not a layer of c}}
kvq.attend_kernel @a of @c layers [0, 2]

// -----

// expected-error @+1 {{'kvq.attend_kernel' op names no kvq.cache @missing}}
kvq.attend_kernel @a of @missing layers [0]

// -----

kvq.cache @c model <layers = 1, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
// expected-error @+1 {{'kvq.keynorm_kernel' op layer 0 has no key normalisation}}
kvq.keynorm_kernel @kn of @c layers [0]

// -----

kvq.cache @c model <layers = 1, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
// expected-error @+1 {{'kvq.attend_kernel' op serves no layer}}
kvq.attend_kernel @a of @c layers []
