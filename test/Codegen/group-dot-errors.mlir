// RUN: kvq-opt %s --split-input-file --verify-diagnostics

func.func @tile_length(%codes: vector<32xi32>, %s: f32, %o: f32, %q: vector<16xf32>, %qs: f32) -> f32 {
  // expected-error @below {{'kvq.group_dot' op tile 0 has 16 elements for a group of 32 codes}}
  %d = kvq.group_dot %codes slope %s offset %o tiles(%q) sums(%qs) : vector<32xi32>, vector<16xf32> -> f32
  return %d : f32
}

// -----

func.func @sums(%codes: vector<32xi32>, %s: f32, %o: f32, %q0: vector<32xf32>, %q1: vector<32xf32>, %qs: f32) -> (f32, f32) {
  // expected-error @below {{'kvq.group_dot' op has 1 sums for 2 tiles}}
  %d:2 = kvq.group_dot %codes slope %s offset %o tiles(%q0, %q1) sums(%qs) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
  return %d#0, %d#1 : f32, f32
}

// -----

func.func @dots(%codes: vector<32xi32>, %s: f32, %o: f32, %q0: vector<32xf32>, %q1: vector<32xf32>, %qs0: f32, %qs1: f32) -> f32 {
  // expected-error @below {{'kvq.group_dot' op has 1 dots for 2 tiles}}
  %d = kvq.group_dot %codes slope %s offset %o tiles(%q0, %q1) sums(%qs0, %qs1) : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32
  return %d : f32
}

// -----

func.func @no_tiles(%codes: vector<32xi32>, %s: f32, %o: f32) {
  // expected-error @below {{'kvq.group_dot' op has no tiles}}
  "kvq.group_dot"(%codes, %s, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (vector<32xi32>, f32, f32) -> ()
  return
}
