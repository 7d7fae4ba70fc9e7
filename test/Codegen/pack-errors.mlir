// RUN: kvq-opt %s --split-input-file --verify-diagnostics

func.func @too_few_words(%codes: vector<16xi32>) -> vector<1xi32> {
  // expected-error @below {{'kvq.pack' op packs 48 bits of codes into 1 words; they fill 2}}
  %words = kvq.pack %codes {bits = 3 : i32} : vector<16xi32> -> vector<1xi32>
  return %words : vector<1xi32>
}

// -----

func.func @spare_word(%codes: vector<16xi32>) -> vector<2xi32> {
  // expected-error @below {{'kvq.pack' op packs 32 bits of codes into 2 words; they fill 1}}
  %words = kvq.pack %codes {bits = 2 : i32} : vector<16xi32> -> vector<2xi32>
  return %words : vector<2xi32>
}

// -----

func.func @wide_codes(%codes: vector<4xi32>) -> vector<5xi32> {
  // expected-error @below {{attribute 'bits' failed to satisfy constraint}}
  %words = kvq.pack %codes {bits = 9 : i32} : vector<4xi32> -> vector<5xi32>
  return %words : vector<5xi32>
}
