// Variant for kvq-eval: KIVI-2 (specs/kivi-2bit.mlir) with Hadamard-rotated
// keys and values (docs/Numerics.md, "Hadamard rotation"), random signs from
// seed 1. Against kivi-2bit, it asks what spreading outlier channels over
// the head costs or saves at the same bits.
kvq.cache @kivi_2bit_rotated model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
  }
}
