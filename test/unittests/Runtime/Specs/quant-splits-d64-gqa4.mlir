// Test-only: quantized keys and values whose groups the splits cut. The
// value groups (span=tokens, 16 tokens) start 5 tokens after the splits'
// boundaries (5 value sinks) and the key sinks are 3, so that a 64-token
// split's page rows begin and end inside groups; both tensors' groups fill
// whole words, so that the attend program reads keys and values a group at
// a time, with the partial groups at a split's ends an element at a time.
// AttendProgramTests runs its attend kernel emitted and built as a program
// (--kvq-quantized-attend-programs).
kvq.cache @quant_splits_d64_gqa4 model <layers = 1, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 32 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v3", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 64, host_split_tokens = 64>} {
  kvq.keys window <sink = 3, recent = 8, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 16>
  }
  kvq.values window <sink = 5, recent = 24, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16>
  }
}
