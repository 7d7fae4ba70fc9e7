// kivi2-d128-gqa4 with a target of its own: 256-thread GPU blocks (8 warps)
// instead of kvq's default 128. The end-to-end tests run it on the PTX
// interpreter, so the warp and block sizes the GPU kernels read from
// #kvq.target are checked against the reference, not only assembled. Its
// host CPU is a generic one (x86-64-v3): the tests run on other machines
// too (the GPU's).
kvq.cache @kivi2_d128_gqa4_block256 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 128, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80", "sm_90"], warp_size = 32, block_threads = 256, split_tokens = 512, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
