// kvq-instantiate-programs gives block-local memory each target's form only
// where it is a 1-D memref allocated at the program's top level, static or
// sized per split token (kvq.split_local, whose storage holds the target's
// split capacity); anything else is refused with a diagnostic, not emitted
// wrongly.
// RUN: kvq-opt %s --kvq-instantiate-programs -split-input-file -verify-diagnostics

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }
  module @c_host attributes {kvq.cache = @c} {
  }
  gpu.module @c_kernels attributes {kvq.cache = @c} {
  }
  module @c_program attributes {kvq.cache = @c, kvq.program} {
    func.func @c_track(%a: memref<?xf16>, %b: memref<?xf16>, %c: memref<?xf16>, %d: memref<?xf16>, %e: memref<?xf16>, %f: memref<?xf16>, %g: memref<?xi32>, %h: i32, %i: i32, %j: i32, %k: i32) attributes {kvq.kernel = {kind = "track", layers = array<i64: 0>}} {
      // expected-error @below {{block-local memory must be a 1-D memref allocated at the program's top level, static or sized per split token (kvq.split_local)}}
      %scratch = memref.alloca() : memref<4x4xf32, #gpu.address_space<workgroup>>
      return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }
  module @c_host attributes {kvq.cache = @c} {
  }
  gpu.module @c_kernels attributes {kvq.cache = @c} {
  }
  module @c_program attributes {kvq.cache = @c, kvq.program} {
    func.func @c_track(%a: memref<?xf16>, %b: memref<?xf16>, %c: memref<?xf16>, %d: memref<?xf16>, %e: memref<?xf16>, %f: memref<?xf16>, %g: memref<?xi32>, %h: i32, %i: i32, %j: i32, %k: i32) attributes {kvq.kernel = {kind = "track", layers = array<i64: 0>}} {
      %true = arith.constant true
      scf.if %true {
        // expected-error @below {{block-local memory must be a 1-D memref allocated at the program's top level, static or sized per split token (kvq.split_local)}}
        %scratch = memref.alloca() : memref<4xf32, #gpu.address_space<workgroup>>
      }
      return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512>} {
    kvq.keys window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
    kvq.values window <recent = 0, flush = 1> {
      kvq.layers 0 to 1 : #kvq.full_precision
    }
  }
  module @c_host attributes {kvq.cache = @c} {
  }
  gpu.module @c_kernels attributes {kvq.cache = @c} {
  }
  module @c_program attributes {kvq.cache = @c, kvq.program} {
    func.func @c_track(%a: memref<?xf16>, %b: memref<?xf16>, %c: memref<?xf16>, %d: memref<?xf16>, %e: memref<?xf16>, %f: memref<?xf16>, %g: memref<?xi32>, %h: i32, %i: i32, %j: i32, %k: i32) attributes {kvq.kernel = {kind = "track", layers = array<i64: 0>}} {
      // A size known at run time only, with no bound the target knows.
      %n = arith.index_castui %h : i32 to index
      // expected-error @below {{block-local memory must be a 1-D memref allocated at the program's top level, static or sized per split token (kvq.split_local)}}
      %scratch = memref.alloca(%n) : memref<?xf32, #gpu.address_space<workgroup>>
      return
    }
  }
}

