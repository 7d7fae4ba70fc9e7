// Test-only: a target whose CPU vectors have one lane (#kvq.target's
// vector_lanes = 1), so that the attend kernel's vector forms run with
// vector<1 x f32> values: one layer per form (span=tokens keys with
// span=channels values, span=channels keys with key norms and span=tokens
// values). ShippedSpecsTests compares the CPU backend with the PTX
// interpreter (8 lanes a thread): codes bit for bit, attention within
// tolerance. A generic host CPU (x86-64-v3), since the target is stated
// here: the tests run on other machines too (the GPU's).
kvq.cache @one_lane_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, vector_lanes = 1, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 64> {
    kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <recent = 33, flush = 32> {
    kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}
