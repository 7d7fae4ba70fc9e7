// Span=tokens keys (KIVI's) behind 5 sink tokens, split every 64 tokens: a
// split's quantized keys start at any place of a group (the second split's
// 59 tokens past the first quantized one), codes of 2 and 4 bits, asym and
// sym. Runtime end-to-end tests of the attend program's rows of tokens; the
// tests also compile it stating AVX-512 VNNI's i16 pair dots
// (test/unittests/EndToEnd/CMakeLists.txt).
kvq.cache @token_keys_d64_gqa4 model <layers = 2, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 64 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 64, host_split_tokens = 64>} {
  kvq.keys window <sink = 5, recent = 1, flush = 64> {
    kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 4, mode = sym, span = tokens, group = 16>
  }
  kvq.values window <recent = 33, flush = 1> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
