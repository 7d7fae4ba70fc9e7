// RUN: kvq-opt %s --split-input-file --verify-diagnostics

func.func @not_power_of_two(%rows: memref<96xf32>) {
  // expected-error @below {{'kvq.hadamard' op rotates rows of 48 channels; the transform needs a power of two}}
  kvq.hadamard %rows dim 48 : memref<96xf32>
  return
}

// -----

func.func @partial_row(%rows: memref<96xf32>) {
  // expected-error @below {{'kvq.hadamard' op needs a buffer of whole rows of 64 channels, not 'memref<96xf32>'}}
  kvq.hadamard %rows dim 64 : memref<96xf32>
  return
}

// -----

func.func @dynamic(%rows: memref<?xf32>) {
  // expected-error @below {{'kvq.hadamard' op needs a buffer of whole rows of 64 channels, not 'memref<?xf32>'}}
  kvq.hadamard %rows dim 64 : memref<?xf32>
  return
}

// -----

func.func @wide_seed(%rows: memref<64xf32>) {
  // expected-error @below {{'kvq.hadamard' op seed 4294967296 is not a `rotate_seed` (32 bits)}}
  kvq.hadamard %rows dim 64 seed 4294967296 : memref<64xf32>
  return
}

// -----

func.func @f16_rows(%rows: memref<64xf16>) {
  // expected-error @below {{operand #0 must be 1D memref of 32-bit float values}}
  kvq.hadamard %rows dim 64 : memref<64xf16>
  return
}

// -----

func.func @no_channels(%rows: memref<64xf32>) {
  // expected-error @below {{attribute 'dim' failed to satisfy constraint}}
  kvq.hadamard %rows dim 0 : memref<64xf32>
  return
}

// -----

func.func @one_index(%rows: memref<64xf32>) {
  // expected-error @below {{'kvq.hadamard' op input takes (row, channel) as two indices}}
  kvq.hadamard %rows dim 64 input(%c) {
    %x = arith.constant 1.0 : f32
    kvq.yield %x : f32
  } : memref<64xf32>
  return
}

// -----

func.func @no_yield(%rows: memref<64xf32>) {
  // expected-error @below {{'kvq.hadamard' op input must end with kvq.yield}}
  kvq.hadamard %rows dim 64 input(%row, %c) {
    %x = arith.constant 1.0 : f32
  } : memref<64xf32>
  return
}

// -----

func.func @stray_yield() {
  %x = arith.constant 1.0 : f32
  // expected-error @below {{'kvq.yield' op expects parent op 'kvq.hadamard'}}
  kvq.yield %x : f32
}
