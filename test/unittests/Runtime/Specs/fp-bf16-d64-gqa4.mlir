// Test-only: fp-d64-gqa4 for a bf16 model, its host code for x86-64-v3
// (no bf16 registers: a flush's copy of bf16 rows once called a soft-float
// helper that made kernels.so unloadable). AttendProgramTests runs its
// attend kernel emitted and built as a program.
kvq.cache @fp_bf16_d64_gqa4 model <layers = 1, heads = 8, kv_heads = 2, head_dim = 64, dtype = bf16> page 16 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 64, host_split_tokens = 64>} {
  kvq.keys window <sink = 2, recent = 8, flush = 4> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
  kvq.values window <sink = 4, recent = 24, flush = 8> {
    kvq.layers 0 to 1 : #kvq.full_precision
  }
}
