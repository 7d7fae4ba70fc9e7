// expected-error @+1 {{block_threads must be a power of two in [warp_size, 1024]}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 96, split_tokens = 256>} {}
