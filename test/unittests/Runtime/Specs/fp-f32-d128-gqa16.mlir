// Test-only: full-precision f32 keys and values (split outputs in f32), 16
// query heads a kv-head (two tiles of 8), every token in a page; 128-token
// splits on both backends. AttendProgramTests runs its attend kernel
// emitted and built as a program.
kvq.cache @fp_f32_d128_gqa16 model <layers = 1, heads = 16, kv_heads = 1, head_dim = 128, dtype = f32> page 32 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 128, host_split_tokens = 128>} {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
