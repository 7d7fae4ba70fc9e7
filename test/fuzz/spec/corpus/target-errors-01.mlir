// expected-error @+1 {{warp_size must be a power of two <= 64}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 48, block_threads = 128, split_tokens = 256>} {}
