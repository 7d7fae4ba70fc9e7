//===- ChannelPairs.cpp - span=channels key groups on pair dots -----------===//

#include "kvq/Codegen/ChannelPairs.h"

#include "kvq/Codegen/IntegerFactors.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/bit.h"

using namespace mlir;
using namespace kvq;

SmallVector<unsigned> ChannelPairs::getHalfBits(unsigned v,
                                                unsigned wordsPerGroup,
                                                unsigned bits) const {
  SmallVector<unsigned> halfBits;
  for (unsigned half = 0; half < 2 * lanes; ++half) {
    unsigned c = channelOf(v, half);
    halfBits.push_back(c / group * wordsPerGroup * 32 + c % group * bits);
  }
  return halfBits;
}

SmallVector<Value> ChannelPairs::roundQuery(KernelBuilder &kb, Value row,
                                            Value &scale) const {
  Value largest = kb.reduceMax(kb.fabs(row));
  Value toI16 = kb.splat(scaleToI16(kb, largest), 2 * lanes);
  scale = kb.fmul(largest, kb.f32(1 / kI16Max));
  auto laneType = VectorType::get({lanes}, kb.builder().getI32Type());
  SmallVector<Value> pairs;
  for (unsigned v = 0; v < vectors; ++v) {
    SmallVector<int64_t> channels;
    for (unsigned half = 0; half < 2 * lanes; ++half)
      channels.push_back(channelOf(v, half));
    Value rounded = roundToI16(kb, kb.shuffle(row, channels), toI16);
    pairs.push_back(vector::BitCastOp::create(kb.builder(), kb.getLoc(),
                                              laneType, rounded));
  }
  return pairs;
}

/// Lane `i` of `v`; `v` itself for a scalar (one group).
static Value laneOf(KernelBuilder &kb, Value v, int64_t i) {
  if (!isa<VectorType>(v.getType()))
    return v;
  return vector::ExtractOp::create(kb.builder(), kb.getLoc(), v,
                                   ArrayRef<int64_t>{i});
}

ChannelPairScores::ChannelPairScores(KernelBuilder &kb,
                                     const ChannelPairs &pairs,
                                     ArrayRef<Value> queryScales,
                                     ArrayRef<Value> groupSums)
    : pairs(pairs) {
  unsigned heads = queryScales.size(), lanes = pairs.lanes;
  auto f32Lanes = VectorType::get({lanes}, kb.builder().getF32Type());
  for (unsigned h0 = 0; h0 < heads;) {
    unsigned count = llvm::bit_floor(std::min(heads - h0, pairs.groupLanes));
    unsigned run = lanes / count;
    SmallVector<Value> scales, sums;
    for (unsigned l = 0; l < lanes; ++l) {
      unsigned r = h0 + l / run, inRun = l % run;
      scales.push_back(queryScales[r]);
      sums.push_back(inRun < pairs.groups ? laneOf(kb, groupSums[r], inRun)
                                          : kb.f32(0));
    }
    chunks.push_back({h0, count,
                      vector::FromElementsOp::create(kb.builder(), kb.getLoc(),
                                                     f32Lanes, scales),
                      vector::FromElementsOp::create(kb.builder(), kb.getLoc(),
                                                     f32Lanes, sums)});
    h0 += count;
  }
}

SmallVector<Value> ChannelPairScores::score(KernelBuilder &kb,
                                            ArrayRef<Value> sums, Value slopes,
                                            Value offsets) const {
  // Lane l of group l % groups: the groups' parameters repeated.
  unsigned lanes = pairs.lanes, groups = pairs.groups;
  SmallVector<int64_t> laneGroups;
  for (unsigned l = 0; l < lanes; ++l)
    laneGroups.push_back(l % groups);
  Value laneSlopes = kb.shuffle(slopes, laneGroups);
  Value laneOffsets = kb.shuffle(offsets, laneGroups);
  auto addI = [&](Value x, Value y) { return kb.add(x, y); };
  auto addF = [&](Value x, Value y) { return kb.fadd(x, y); };
  SmallVector<Value> dots;
  for (const HeadChunk &chunk : chunks) {
    unsigned run = lanes / chunk.count;
    Value groupDots = kb.foldRuns(
        kb.combineVectors(sums.slice(chunk.first, chunk.count), addI), run,
        groups, addI);
    Value groupScores = kb.fadd(
        kb.fmul(laneOffsets, chunk.groupSums),
        kb.fmul(kb.sitofp(groupDots), kb.fmul(laneSlopes, chunk.scales)));
    dots.push_back(kb.foldRuns(groupScores, groups, 1, addF));
  }
  return dots;
}
