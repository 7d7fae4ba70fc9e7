//===- AttendForms.cpp - the form of each loop of an attend kernel ------===//
//
// Each form states what it needs of the keys' or values' slice and of the
// target's units; the first form whose needs are met is the kernel's. The
// emitters read the choice (AttendFormsAttr) and decide nothing.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Forms.h"
#include "kvq/Codegen/IntegerFactors.h"

#include "AttendEmitter.h"

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

std::pair<unsigned, unsigned>
kvq::attend::planValuePasses(const TargetInfo &info, unsigned heads,
                             unsigned chunks, unsigned groupChunks) {
  unsigned maxAccumulators = getMaxAccumulators(info);
  unsigned passHeads = std::max(1u, std::min(heads, maxAccumulators));
  unsigned passChunks = std::max(1u, maxAccumulators / passHeads);
  if (passChunks >= groupChunks)
    passChunks = std::min(chunks, passChunks / groupChunks * groupChunks);
  else
    while (groupChunks % passChunks != 0)
      --passChunks;
  return {passHeads, passChunks};
}

namespace {

/// What the forms of one attend kernel read: its slices, its tile of query
/// heads and the target.
class AttendFormSelector {
public:
  AttendFormSelector(const CacheLayout &layout, unsigned layer,
                     const TargetInfo &info, MLIRContext *ctx)
      : layout(layout), keys(layout.keys.layers[layer]),
        values(layout.values.layers[layer]), info(info), ctx(ctx),
        heads(getAttendTileHeads(layout.model.getGroupRatio())),
        dim(layout.model.getHeadDim()),
        rope(keys.isQuantized() && keys.quant.getPreRope()) {}

  KeyForm selectKeys() const;
  ValueForm selectValues() const;

private:
  const SliceLayout &slice(bool isKeys) const { return isKeys ? keys : values; }
  unsigned lanesOf(unsigned count) const { return getLanes(info, count); }

  /// What every i16 form needs: the target's dot unit is theirs on blocks of
  /// one thread (the CPU), codes of `span`, no reorder.
  bool mayUseI16Dots(bool isKeys, Span span) const;
  bool scoresTokenBlocksOnI16() const;
  bool scoresChannelGroupsOnI16() const;
  bool sumsChannelGroupsOnI16() const;
  bool sumsTokenBlocksOnI16() const;
  /// What every matrix form needs: the target's matrix unit is theirs,
  /// codes of `span`, no reorder (keys: no pre-RoPE), a tile of heads within
  /// B's columns.
  bool mayUseMatrix(bool isKeys, Span span) const;
  bool scoresTokenBlocksOnMatrix() const;
  bool scoresChannelGroupsOnMatrix() const;
  bool sumsChannelGroupsOnMatrix() const;
  bool sumsTokenBlocksOnMatrix() const;

  const CacheLayout &layout;
  const SliceLayout &keys, &values;
  const TargetInfo &info;
  MLIRContext *ctx;
  unsigned heads, dim;
  bool rope;
};

} // namespace

bool AttendFormSelector::mayUseI16Dots(bool isKeys, Span span) const {
  const SliceLayout &s = slice(isKeys);
  return info.dot && info.dot == kI16PairDots.getUnit(ctx) &&
         info.blockThreads == 1 && s.isQuantized() &&
         s.quant.getSpan() == span && !s.hasReorder();
}

bool AttendFormSelector::scoresTokenBlocksOnI16() const {
  if (!mayUseI16Dots(/*isKeys=*/true, Span::Tokens))
    return false;
  // A channel pair per i32 lane (each code within two bytes of its
  // channel's stream) and tokens as lanes.
  unsigned bits = keys.quant.getBits();
  return lanesOf(keys.quant.getGroup()) == info.vectorLanes && dim % 2 == 0 &&
         bits <= 8 && sumsFitI32(dim, bits);
}

bool AttendFormSelector::scoresChannelGroupsOnI16() const {
  if (!mayUseI16Dots(/*isKeys=*/true, Span::Channels))
    return false;
  // Every group in each vector, and a token's codes within one 64-byte
  // shuffle.
  unsigned lanes = info.vectorLanes, groups = keys.GroupsPerToken;
  unsigned bits = keys.quant.getBits(), group = keys.quant.getGroup();
  if (bits > 8 || groups > lanes || lanes % groups != 0 ||
      groups * keys.WordsPerGroup * 4 > 64 || group % (2 * lanes / groups) != 0)
    return false;
  // A head's i32 lanes of a group are summed before they go to f32.
  return sumsFitI32(group, bits);
}

bool AttendFormSelector::sumsChannelGroupsOnI16() const {
  if (!mayUseI16Dots(/*isKeys=*/false, Span::Channels))
    return false;
  unsigned bits = values.quant.getBits(), lanes = info.vectorLanes;
  unsigned group = values.quant.getGroup();
  if (lanesOf(group) != lanes || bits > 8 ||
      !sumsFitI32(kValueBlockTokens, bits) ||
      layout.pageTokens % kValueBlockTokens != 0)
    return false;
  // Passes of whole groups whose two tokens' codes fit one 64-byte shuffle.
  unsigned groupChunks = group / lanes;
  unsigned chunks = values.GroupsPerToken * groupChunks;
  unsigned passChunks =
      planValuePasses(info, heads, chunks, groupChunks).second;
  return passChunks % groupChunks == 0 &&
         2 * (passChunks / groupChunks) * values.WordsPerGroup * 4 <= 64;
}

bool AttendFormSelector::sumsTokenBlocksOnI16() const {
  if (!mayUseI16Dots(/*isKeys=*/false, Span::Tokens))
    return false;
  unsigned bits = values.quant.getBits(), group = values.quant.getGroup();
  unsigned lanes = info.vectorLanes;
  // Token quads; lanes of two halves of a chunk's streams.
  return lanesOf(dim) == lanes && lanes % 2 == 0 && group % 4 == 0 &&
         bits <= 8 && sumsFitI32(group, bits);
}

bool AttendFormSelector::mayUseMatrix(bool isKeys, Span span) const {
  // Pre-RoPE keys are rotated per token, reordered slices have groups of
  // variable size: both keep the vector forms.
  const SliceLayout &s = slice(isKeys);
  return info.matrix && info.matrix == MatrixUnit::getAttr(ctx) &&
         s.isQuantized() && s.quant.getSpan() == span && !s.hasReorder() &&
         !(isKeys && rope) && heads <= MatrixUnit::kN;
}

bool AttendFormSelector::scoresTokenBlocksOnMatrix() const {
  if (!mayUseMatrix(/*isKeys=*/true, Span::Tokens))
    return false;
  unsigned bits = keys.quant.getBits(), group = keys.quant.getGroup();
  // A tile's 16 tokens are whole bytes of one word of each channel, rows g
  // and g + 8 in one byte: 1 or 2 bits.
  return bits <= 2 && group % MatrixUnit::kM == 0 &&
         keys.WordsPerGroup * 32 == group * bits && dim % MatrixUnit::kK == 0;
}

bool AttendFormSelector::scoresChannelGroupsOnMatrix() const {
  if (!mayUseMatrix(/*isKeys=*/true, Span::Channels))
    return false;
  return hasFieldCodes(keys) && layout.pageTokens % MatrixUnit::kM == 0;
}

bool AttendFormSelector::sumsChannelGroupsOnMatrix() const {
  if (!mayUseMatrix(/*isKeys=*/false, Span::Channels))
    return false;
  unsigned bits = values.quant.getBits(), group = values.quant.getGroup();
  unsigned rowChannels = dim / 8, rowBytes = rowChannels * bits / 8;
  // Whole tiles, a thread's channels inside one group and on whole byte
  // pairs of one word (or whole words), groups packed without padding, and
  // steps inside one page.
  return 8 % bits == 0 && dim % MatrixUnit::kM == 0 &&
         group % rowChannels == 0 && rowBytes % 2 == 0 &&
         (rowBytes <= 4 ? 4 % rowBytes == 0 : rowBytes % 4 == 0) &&
         values.WordsPerGroup * 32 == group * bits &&
         layout.pageTokens % MatrixUnit::kK == 0;
}

bool AttendFormSelector::sumsTokenBlocksOnMatrix() const {
  if (!mayUseMatrix(/*isKeys=*/false, Span::Tokens))
    return false;
  // A block's weights are summed by group / 8 workers.
  unsigned group = values.quant.getGroup();
  return hasFieldCodes(values) && llvm::isPowerOf2_32(group) &&
         group / 8 <= info.maxWorkers && dim % MatrixUnit::kM == 0;
}

KeyForm AttendFormSelector::selectKeys() const {
  if (!keys.isQuantized())
    return KeyForm::Rows;
  if (rope)
    return KeyForm::PreRope;
  if (keys.hasReorder())
    return KeyForm::Reordered;
  if (scoresTokenBlocksOnMatrix())
    return KeyForm::TokenBlocksMatrix;
  if (scoresChannelGroupsOnMatrix())
    return KeyForm::ChannelGroupsMatrix;
  if (scoresChannelGroupsOnI16())
    return KeyForm::ChannelGroupsI16;
  if (keys.quant.getSpan() == Span::Channels)
    return KeyForm::ChannelGroups;
  return scoresTokenBlocksOnI16() ? KeyForm::TokenBlocksI16
                                  : KeyForm::TokenBlocks;
}

ValueForm AttendFormSelector::selectValues() const {
  if (!values.isQuantized())
    return ValueForm::Rows;
  if (values.hasReorder())
    return ValueForm::Reordered;
  if (sumsChannelGroupsOnMatrix())
    return ValueForm::ChannelGroupsMatrix;
  if (sumsTokenBlocksOnMatrix())
    return ValueForm::TokenBlocksMatrix;
  if (sumsChannelGroupsOnI16())
    return ValueForm::ChannelGroupsI16;
  if (values.quant.getSpan() == Span::Channels)
    return ValueForm::ChannelGroups;
  return sumsTokenBlocksOnI16() ? ValueForm::TokenBlocksI16
                                : ValueForm::TokenBlocks;
}

AttendFormsAttr kvq::selectAttendForms(const CacheLayout &layout,
                                       unsigned layer, const TargetInfo &info,
                                       MLIRContext *ctx) {
  AttendFormSelector selector(layout, layer, info, ctx);
  return AttendFormsAttr::get(ctx, selector.selectKeys(),
                              selector.selectValues());
}
