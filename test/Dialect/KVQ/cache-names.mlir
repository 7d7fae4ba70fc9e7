// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// A cache's name becomes the artifact's directory (beside the others of a
// multi-cache spec), the prefix of its kernels' LLVM symbols and their PTX
// entries: only identifiers are accepted. Names with a space, `/`, unicode
// or an escape aborted --kvq-compile ("LLVM ERROR: Symbol name with
// unsupported characters"), `..` wrote the artifact into the output
// directory's parent, and `.` or `-` gave PTX that ptxas cannot parse.

// expected-error @+1 {{'kvq.cache' op name must be an identifier of at most 128 characters (a letter or '_', then letters, digits or '_': it names the artifact directory, the kernels' symbols and PTX entries), got @"a b"}}
kvq.cache @"a b" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"a/b"}}
kvq.cache @"a/b" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @".."}}
kvq.cache @".." model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"."}}
kvq.cache @"." model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"kivi.2bit"}}
kvq.cache @kivi.2bit model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"kivi-2bit"}}
kvq.cache @"kivi-2bit" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Unicode and escapes are quoted escaped.
// expected-error @+1 {{got @"caf\C3\A9"}}
kvq.cache @"café" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"a\0Ab\00c"}}
kvq.cache @"a\nb\00c" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @"2bit"}}
kvq.cache @"2bit" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// expected-error @+1 {{got @""}}
kvq.cache @"" model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// 129 characters: shortened to 64 in the message.
// expected-error @+1 {{got @"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..."}}
kvq.cache @aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}

// -----

// Accepted: 128 characters, a leading '_', digits and '_' after it.
kvq.cache @_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_2bit_9 model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
