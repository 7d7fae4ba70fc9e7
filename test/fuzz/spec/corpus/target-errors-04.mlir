// expected-error @+1 {{split_tokens and host_split_tokens must be in [1, 1048576]}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 0>} {}
