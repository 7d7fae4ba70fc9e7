//===- BitAccounting.cpp - equivalent bits and exact bytes ----------------===//

#include "kvq/Analysis/BitAccounting.h"

#include "llvm/Support/MathExtras.h"

#include <numeric>

using namespace mlir;
using namespace kvq;

namespace {
/// Bits one (layer, kv-head) of a tensor stores per token.
struct TokenBits {
  uint64_t codes = 0;
  uint64_t params = 0;
};
} // namespace

/// Group sizes along one token for span = channels (after any reorder), in
/// (layer, kv-head) `slice`.
static SmallVector<uint64_t> getChannelGroupSizes(QuantAttr quant,
                                                  ModelAttr model,
                                                  unsigned layer,
                                                  unsigned head) {
  unsigned groups = model.getHeadDim() / quant.getGroup();
  if (ReorderAttr reorder = quant.getReorder()) {
    // The verifier has checked that the table is readable and well-formed.
    SmallVector<int64_t> sizes = *reorder.readSizes();
    uint64_t first = (uint64_t(layer) * model.getKvHeads() + head) * groups;
    return SmallVector<uint64_t>(sizes.begin() + first,
                                 sizes.begin() + first + groups);
  }
  return SmallVector<uint64_t>(groups, quant.getGroup());
}

/// Bits per token of one (layer, kv-head) of a quantized tensor, averaged
/// over a flush for span = tokens. Scaled by `per` to stay integral: the
/// result is for `per` tokens.
static TokenBits getQuantTokenBits(const LayerScheme &layer, ModelAttr model,
                                   unsigned index, unsigned head,
                                   uint64_t per) {
  QuantAttr quant = layer.getQuant();
  uint64_t paramBits = quant.getParamsPerGroup() * quant.getParamBits();
  TokenBits bits;
  if (quant.getSpan() == Span::Tokens) {
    uint64_t groups = per / quant.getGroup() * model.getHeadDim();
    bits.codes = groups * quant.getGroupCodeBits(quant.getGroup());
    bits.params = groups * paramBits;
  } else {
    for (uint64_t size : getChannelGroupSizes(quant, model, index, head)) {
      bits.codes += per * quant.getGroupCodeBits(size);
      bits.params += per * paramBits;
    }
  }
  if (layer.codesFrom)
    bits.codes = 0;
  return bits;
}

/// Visits every (layer, kv-head) of keys and values with its scheme.
template <typename Fn> static void forEachSlice(CacheOp cache, Fn &&fn) {
  ModelAttr model = cache.getModel();
  SmallVector<LayerScheme> keys = cache.getKeys().getLayerSchemes();
  SmallVector<LayerScheme> values = cache.getValues().getLayerSchemes();
  for (auto [schemes, window] :
       {std::make_pair(&keys, cache.getKeys().getWindow()),
        std::make_pair(&values, cache.getValues().getWindow())})
    for (unsigned layer = 0; layer < model.getLayers(); ++layer)
      for (unsigned head = 0; head < model.getKvHeads(); ++head)
        fn((*schemes)[layer], window, layer, head);
}

EquivalentBits kvq::computeEquivalentBits(CacheOp cache) {
  ModelAttr model = cache.getModel();
  uint64_t dtypeBits = model.getDtype().getIntOrFloatBitWidth();
  // Bits of `per` tokens of every slice; `per` is a common multiple of every
  // group size so that span = tokens groups are whole.
  uint64_t per = 1;
  forEachSlice(cache,
               [&](const LayerScheme &layer, WindowAttr, unsigned, unsigned) {
                 if (QuantAttr quant = layer.getQuant())
                   per = std::lcm(per, uint64_t(quant.getGroup()));
               });
  uint64_t codeBits = 0, paramBits = 0, elements = 0;
  forEachSlice(cache, [&](const LayerScheme &layer, WindowAttr, unsigned index,
                          unsigned head) {
    elements += per * model.getHeadDim();
    if (!layer.getQuant()) {
      codeBits += per * model.getHeadDim() * dtypeBits;
      return;
    }
    TokenBits bits = getQuantTokenBits(layer, model, index, head, per);
    codeBits += bits.codes;
    paramBits += bits.params;
  });
  return {double(codeBits) / elements, double(codeBits + paramBits) / elements};
}

TokenRegions kvq::splitTokens(WindowAttr window, uint64_t tokens) {
  TokenRegions regions;
  regions.sink = std::min<uint64_t>(tokens, window.getSink());
  uint64_t rest = tokens - regions.sink;
  uint64_t recent = window.getRecent(), flush = window.getFlush();
  if (rest >= recent + flush)
    regions.quantized = (rest - recent) / flush * flush;
  regions.recent = rest - regions.quantized;
  return regions;
}

SequenceBytes kvq::computeSequenceBytes(CacheOp cache, uint64_t tokens) {
  ModelAttr model = cache.getModel();
  uint64_t page = cache.getPage(), dim = model.getHeadDim();
  uint64_t dtypeBytes = model.getDtype().getIntOrFloatBitWidth() / 8;
  SequenceBytes bytes;
  forEachSlice(cache, [&](const LayerScheme &layer, WindowAttr window,
                          unsigned index, unsigned head) {
    uint64_t pages =
        llvm::divideCeil(splitTokens(window, tokens).quantized, page);
    uint64_t windowTokens =
        window.getSink() + window.getRecent() + window.getFlush() - 1;
    bytes.fullPrecision += windowTokens * dim * dtypeBytes;
    if (!layer.getQuant()) {
      bytes.codes += pages * page * dim * dtypeBytes;
      return;
    }
    TokenBits bits = getQuantTokenBits(layer, model, index, head, page);
    bytes.codes += pages * bits.codes / 8;
    bytes.params += pages * bits.params / 8;
  });
  // One block table per tensor, shared by every (layer, kv-head): a page
  // holds `page` tokens of each of them.
  for (WindowAttr window :
       {cache.getKeys().getWindow(), cache.getValues().getWindow()})
    bytes.metadata +=
        llvm::divideCeil(splitTokens(window, tokens).quantized, page) *
        sizeof(uint32_t);
  for (const LayerScheme &layer : cache.getKeys().getLayerSchemes())
    if (QuantAttr quant = layer.getQuant(); quant && quant.getKeyNorm())
      bytes.metadata += model.getKvHeads() * dim * sizeof(float);
  if (PoolAttr pool = cache.getPoolAttr()) {
    uint64_t tracked = model.getLayers() - pool.getFirstLayer();
    uint64_t entries = pool.getCapacity() + pool.getExtra();
    // Each entry: the token's key and value, and its position.
    bytes.pools += tracked * model.getKvHeads() * entries *
                   (2 * dim * dtypeBytes + sizeof(uint32_t));
  }
  return bytes;
}
