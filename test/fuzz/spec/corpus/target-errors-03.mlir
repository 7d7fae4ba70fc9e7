// expected-error @+1 {{chips must name at least one GPU}}
module attributes {kvq.target = #kvq.target<host_cpu = "native", chips = [], warp_size = 32, block_threads = 128, split_tokens = 256>} {}
