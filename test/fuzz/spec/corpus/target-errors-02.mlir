// expected-error @+1 {{chips must be strings naming sm_XX targets}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["gfx90a"], warp_size = 32, block_threads = 128, split_tokens = 256>} {}
