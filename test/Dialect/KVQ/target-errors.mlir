// RUN: kvq-opt %s -split-input-file -verify-diagnostics -o /dev/null

// expected-error @+1 {{block_threads must be a power of two in [warp_size, 1024]}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 96, split_tokens = 256>} {}

// -----

// expected-error @+1 {{warp_size must be a power of two <= 64}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 48, block_threads = 128, split_tokens = 256>} {}

// -----

// expected-error @+1 {{chips must be strings naming sm_XX targets}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["gfx90a"], warp_size = 32, block_threads = 128, split_tokens = 256>} {}

// -----

// expected-error @+1 {{chips must name at least one GPU}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = [], warp_size = 32, block_threads = 128, split_tokens = 256>} {}

// -----

// expected-error @+1 {{split_tokens and host_split_tokens must be in [1, 1048576]}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 0>} {}

// -----

// expected-error @+1 {{split_tokens and host_split_tokens must be in [1, 1048576]}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 512, host_split_tokens = 0>} {}

// -----

// expected-error @+1 {{host_cpu must name a CPU (or 'native')}}
module attributes {kvq.target = #kvq.target<host_cpu = "", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256>} {}

// -----

// expected-error @+1 {{vector_lanes must be a power of two <= 64}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, vector_lanes = 12>} {}

// -----

// vpdpwssd's 16 lanes are one 512-bit register.
// expected-error @+1 {{cpu_dot must have m = vector_lanes (8)}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, vector_lanes = 8, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>>} {}

// -----

// An mma.sync is a whole warp's.
// expected-error @+1 {{gpu_matrix needs warp_size = 32}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 64, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {}

// -----

// expected-error @below {{a dot unit's n must be 1}}
// expected-error @below {{failed to parse KVQ_TargetAttr parameter 'cpu_dot'}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 2, k = 2, operands = i16, accumulator = i32>>} {}

// -----

// expected-error @below {{the accumulator must be at least as wide as the operands}}
// expected-error @below {{failed to parse KVQ_TargetAttr parameter 'gpu_matrix'}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f32, accumulator = f16>>} {}

// -----

// expected-error @below {{m, n and k must be positive}}
// expected-error @below {{failed to parse KVQ_TargetAttr parameter 'gpu_matrix'}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 0, n = 8, k = 16, operands = f16, accumulator = f32>>} {}
