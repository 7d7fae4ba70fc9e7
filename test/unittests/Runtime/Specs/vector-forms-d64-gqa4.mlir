// Test-only: one layer per combination the CPU kernels' vector forms treat
// differently (codes straddling words, 4+ words per group, hybrid lanes,
// groups of 8 / 16 / 64, key norms, packed runs wider than 16 bits: 5 and 7
// bits). ShippedSpecsTests compares the CPU backend (16 lanes, one thread)
// with the PTX interpreter (the same forms with 8 lanes a thread over 128
// threads, and the GPU's per-group flush): codes bit for bit, attention
// within tolerance.
kvq.cache @vector_forms_d64_gqa4 model <layers = 5, heads = 8, kv_heads = 2, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 64> {
    kvq.layer 0 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32>
    kvq.layer 1 : #kvq.quant<bits = 3, mode = hybrid, span = tokens, group = 64>
    kvq.layer 2 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 16, key_norm = true>
    kvq.layer 3 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 8>
    kvq.layer 4 : #kvq.quant<bits = 5, mode = asym, span = channels, group = 32>
  }
  kvq.values window <recent = 33, flush = 32> {
    kvq.layer 0 : #kvq.quant<bits = 8, mode = sym, span = channels, group = 16>
    kvq.layer 1 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
    kvq.layer 2 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 64>
    kvq.layer 3 : #kvq.quant<bits = 3, mode = hybrid, span = channels, group = 32>
    kvq.layer 4 : #kvq.quant<bits = 7, mode = sym, span = channels, group = 16>
  }
}
