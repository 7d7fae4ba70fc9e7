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

Value kvq::weighSplit(KernelBuilder &kb, Value maxScore,
                      function_ref<Value()> score, function_ref<Value()> sum) {
  return kb.fmul(kb.exp2(kb.fsub(score(), maxScore)), sum());
}

Value kvq::mergeOutputs(KernelBuilder &kb, Value weighted, Value total) {
  auto vector = dyn_cast<VectorType>(weighted.getType());
  auto like = [&](Value x) {
    return vector ? kb.splat(x, vector.getNumElements()) : x;
  };
  return kb.select(kb.flt(kb.f32(0), total), kb.fdiv(weighted, like(total)),
                   like(kb.f32(0)));
}

Value kvq::inverseOrZero(KernelBuilder &kb, Value l) {
  return kb.select(kb.flt(kb.f32(0), l), kb.fdiv(kb.f32(1), l), kb.f32(0));
}

void kvq::mergeSplits(KernelBuilder &kb, const CacheLayout &layout,
                      Value partial, Value out, Value numSplits, Value firstRow,
                      unsigned rows) {
  // One item per row and chunk of `lanes` channels, all rows at once: a
  // GPU block's threads take the items side by side, so the merge costs
  // one pass over the splits (not one per head), each split's outputs one
  // vector load. An item computes its row's maximum and weights itself: a
  // few loads and an exp2 per split, less than a round trip through shared
  // memory and a barrier.
  KernelTarget &target = kb.getTarget();
  unsigned dim = layout.model.getHeadDim(), stride = dim + 2;
  unsigned lanes = getLanes(target, dim), chunks = dim / lanes;
  Type f32 = kb.builder().getF32Type();
  Type outputType = getPartialOutputType(layout, kb.builder().getContext());
  unsigned outputBytes = outputType.getIntOrFloatBitWidth() / 8;
  target.parallelFor(kb, kb.i32(rows * chunks), [&](Value i) {
    Value row = kb.add(firstRow, kb.divU(i, kb.i32(chunks)));
    Value c0 = kb.mul(kb.remU(i, kb.i32(chunks)), kb.i32(lanes));
    // Split s's row as a pointer: its fields are loads at constant offsets.
    Value first = kb.mul(kb.mul(row, numSplits), kb.i32(stride));
    Value rowsPtr = kb.gep(partial, kb.mul(kb.toI64(first), kb.i64(4)));
    auto rowOf = [&](Value s) {
      return kb.gep(rowsPtr, kb.mul(kb.toI64(s), kb.i64(int64_t(stride) * 4)));
    };
    // Plain loads: other blocks of the launch wrote the rows (on the GPU
    // the non-coherent path may not see them).
    auto field = [&](Value rowPtr, unsigned slot) {
      return kb.load(f32, rowPtr, kb.i64(int64_t(slot) * 4), 4);
    };
    // The largest m, at least the lowest finite float: then m_s - M is
    // -inf only for an empty split (m = -inf, l = 0) and 2^(m_s - M) l_s
    // is 0 there with no test (2^x <= 1 for x <= 0 on both targets).
    Value maxScore =
        kb.forLoop(kb.i32(0), numSplits, kb.i32(1), {kb.f32(kLowestSplitMax)},
                   [&](Value s, ValueRange acc) -> SmallVector<Value> {
                     return {kb.runningMax(acc[0], field(rowOf(s), 0))};
                   })[0];
    // Outputs start at byte 8 of a row, and rows on 8 bytes.
    Value at = kb.add(kb.i64(8), kb.mul(kb.toI64(c0), kb.i64(outputBytes)));
    auto vectorOf = [&](Type element) {
      return VectorType::get({lanes}, element);
    };
    SmallVector<Value> sums = kb.forLoop(
        kb.i32(0), numSplits, kb.i32(1),
        {kb.f32(0), kb.splat(kb.f32(0), lanes)},
        [&](Value s, ValueRange acc) -> SmallVector<Value> {
          Value rowPtr = rowOf(s);
          Value weight = weighSplit(
              kb, maxScore, [&] { return field(rowPtr, 0); },
              [&] { return field(rowPtr, 1); });
          Value outputs = kb.load(vectorOf(outputType), rowPtr, at,
                                  std::min(8u, lanes * outputBytes));
          if (!outputType.isF32())
            outputs = arith::ExtFOp::create(kb.builder(), kb.getLoc(),
                                            vectorOf(f32), outputs);
          return {kb.fadd(acc[0], weight),
                  kb.fadd(acc[1], kb.fmul(kb.splat(weight, lanes), outputs))};
        });
    Value result = mergeOutputs(kb, sums[1], sums[0]);
    // An engine's output tensor need only hold aligned floats.
    kb.store(result, out,
             kb.mul(kb.toI64(kb.add(kb.mul(row, kb.i32(dim)), c0)), kb.i64(4)),
             4);
  });
}
