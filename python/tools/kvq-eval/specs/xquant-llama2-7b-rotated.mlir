// Variant for kvq-eval: XQuant (specs/xquant-llama2-7b.mlir) with its
// per-token values, shared across layers from layer 28, rotated by a
// Hadamard matrix with random signs (seed 1; docs/Numerics.md, "Hadamard
// rotation"); its keys as shipped. The same bits.
kvq.cache @xquant_llama2_7b_rotated model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 28 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 28 to 32 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/3>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 28> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/3, rotate = hadamard, rotate_seed = 1>
  }
}
