//===- SplitMerge.cpp - merge flash-decoding splits -----------------------===//
//
// The attend kernel's last block of a (sequence, kv-head) merges the splits
// of each of its query heads: o = sum_s w_s o_s / sum_s w_s with
// w_s = 2^(m_s - M) l_s and o_s the split's normalised outputs.
// Scores are kept in log2 units by the attend kernel; empty splits (l = 0)
// contribute nothing, and a sequence with no tokens attends to zeros.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"

#include <limits>

using namespace mlir;
using namespace kvq;

Type kvq::getPartialOutputType(const CacheLayout &layout, MLIRContext *ctx) {
  Type dtype = layout.model.getDtype();
  return dtype.isF16() ? dtype : Float32Type::get(ctx);
}

Value kvq::getPartialOutputs(KernelBuilder &kb, Value partial, Value row) {
  // Row `row` in f32 slots of D + 2; its outputs from slot 2.
  return kb.gep(partial, kb.mul(kb.toI64(kb.add(row, kb.i32(2))), kb.i64(4)));
}

void kvq::mergeSplits(KernelBuilder &kb, const CacheLayout &layout,
                      Value partial, Value out, Value numSplits, Value row) {
  unsigned dim = layout.model.getHeadDim(), stride = dim + 2;
  Type f32 = kb.builder().getF32Type();
  // Split s's row as a pointer: its fields are loads at constant offsets.
  Value first = kb.mul(kb.mul(row, numSplits), kb.i32(stride));
  Value rows = kb.gep(partial, kb.mul(kb.toI64(first), kb.i64(4)));
  auto rowOf = [&](Value s) {
    return kb.gep(rows, kb.mul(kb.toI64(s), kb.i64(int64_t(stride) * 4)));
  };
  // Plain loads: other blocks of the launch wrote the rows (on the GPU the
  // non-coherent path may not see them).
  auto field = [&](Value rowPtr, unsigned slot) {
    return kb.load(f32, rowPtr, kb.i64(int64_t(slot) * 4), 4);
  };
  // The largest m, at least the lowest finite float: then m_s - M is -inf
  // only for an empty split (m = -inf, l = 0) and 2^(m_s - M) l_s is 0
  // there with no test (2^x <= 1 for x <= 0 on both targets).
  Value maxScore =
      kb.forLoop(kb.i32(0), numSplits, kb.i32(1),
                 {kb.f32(-std::numeric_limits<float>::max())},
                 [&](Value s, ValueRange acc) -> SmallVector<Value> {
                   return {kb.fmax(acc[0], field(rowOf(s), 0))};
                 })[0];
  // Splits are the indices and channels the lanes of accumulate: the CPU
  // loops over the lanes inside each split, so a split's weight (which does
  // not depend on the lane) is computed once per split, not once per channel
  // (LLVM hoists it out of the lane loop); a GPU thread computes it once per
  // split for its channel. Both lanes' sums carry the denominator, so that
  // no second pass recomputes the weights.
  Type outputType = getPartialOutputType(layout, kb.builder().getContext());
  unsigned outputBytes = outputType.getIntOrFloatBitWidth() / 8;
  auto step = [&](Value s, Value c, ValueRange sums) -> SmallVector<Value> {
    Value rowPtr = rowOf(s);
    Value weight =
        kb.fmul(kb.exp2(kb.fsub(field(rowPtr, 0), maxScore)), field(rowPtr, 1));
    Value at = kb.add(kb.i64(8), kb.mul(kb.toI64(c), kb.i64(outputBytes)));
    Value value = kb.load(outputType, rowPtr, at, outputBytes);
    if (!outputType.isF32())
      value = arith::ExtFOp::create(kb.builder(), kb.getLoc(), f32, value);
    return {kb.fadd(sums[0], weight), kb.fadd(sums[1], kb.fmul(weight, value))};
  };
  std::pair<IndexRange, KernelTarget::AccumulateStep> steps[] = {
      {{kb.i32(0), numSplits}, step}};
  kb.getTarget().accumulate(
      kb, kb.i32(dim), dim, /*numSums=*/2, /*unroll=*/4, steps,
      [&](Value c, ValueRange sums) {
        Value result = kb.select(kb.flt(kb.f32(0), sums[0]),
                                 kb.fdiv(sums[1], sums[0]), kb.f32(0));
        kb.storeF32(result, out, kb.add(kb.mul(row, kb.i32(dim)), c));
      });
}
