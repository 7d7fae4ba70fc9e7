// RUN: kvq-opt %s --split-input-file --verify-diagnostics

func.func @past_the_words(%words: vector<1xi32>) -> vector<16xi32> {
  // expected-error @below {{'kvq.unpack' op lane 15 reads bits [32, 34) past the 32 bits of its words}}
  %codes = kvq.unpack %words {bits = 2 : i32, offset = 2 : i32, stride = 2 : i32} : vector<1xi32> -> vector<16xi32>
  return %codes : vector<16xi32>
}

// -----

func.func @wide_codes(%words: vector<4xi32>) -> vector<4xi32> {
  // expected-error @below {{attribute 'bits' failed to satisfy constraint}}
  %codes = kvq.unpack %words {bits = 9 : i32, offset = 0 : i32, stride = 9 : i32} : vector<4xi32> -> vector<4xi32>
  return %codes : vector<4xi32>
}
