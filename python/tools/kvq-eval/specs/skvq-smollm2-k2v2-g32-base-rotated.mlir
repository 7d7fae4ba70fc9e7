// Variant for kvq-eval: SKVQ's uncalibrated base for SmolLM2
// (skvq-smollm2-k2v2-g32-base.mlir) with keys and values rotated by a
// Hadamard matrix with random signs (seed 1) instead of reordered
// (docs/Numerics.md, "Hadamard rotation": a rotation and a channel reorder
// do not combine). The same bits.
kvq.cache @skvq_smollm2_k2v2_g32_base_rotated model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92, rotate = hadamard, rotate_seed = 1>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92, rotate = hadamard, rotate_seed = 1>
  }
}
