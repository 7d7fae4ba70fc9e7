// RUN: kvq-opt %s -split-input-file -verify-diagnostics -o /dev/null

// The host code's split capacity is a whole number of split granules, as
// the GPU's is (kvq-assign-layout rounds the target's down to one).
// expected-error @+1 {{split_granule must divide split_tokens and host_split_tokens}}
module attributes {kvq.layout = #kvq.layout<page_tokens = 128, split_tokens = 512, host_split_tokens = 1000, split_granule = 32, dtype_bytes = 2, keys = <window_capacity = 128, page_bytes = 16, slices = []>, values = <window_capacity = 1, page_bytes = 16, slices = []>>} {}

// -----

// Unstated, it is the default, 2048, which 384-token granules do not divide.
// expected-error @+1 {{split_granule must divide split_tokens and host_split_tokens}}
module attributes {kvq.layout = #kvq.layout<page_tokens = 128, split_tokens = 384, split_granule = 384, dtype_bytes = 2, keys = <window_capacity = 128, page_bytes = 16, slices = []>, values = <window_capacity = 1, page_bytes = 16, slices = []>>} {}

// -----

// expected-error @+1 {{page_tokens, split_tokens and host_split_tokens must be positive}}
module attributes {kvq.layout = #kvq.layout<page_tokens = 128, split_tokens = 512, host_split_tokens = 0, split_granule = 32, dtype_bytes = 2, keys = <window_capacity = 128, page_bytes = 16, slices = []>, values = <window_capacity = 1, page_bytes = 16, slices = []>>} {}
