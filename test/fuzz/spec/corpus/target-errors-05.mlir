// expected-error @+1 {{host_cpu must name a CPU (or 'native')}}
module attributes {kvq.target = #kvq.target<host_cpu = "", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256>} {}
