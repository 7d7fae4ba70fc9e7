//===- Layout.cpp - physical layout of a compiled cache -------------------===//

#include "kvq/Codegen/Layout.h"

#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <numeric>
#include <string>

using namespace mlir;
using namespace kvq;

bool CacheLayout::hasKeyNorm(unsigned layer) const {
  QuantAttr quant = keys.layers[layer].quant;
  return quant && quant.getKeyNorm();
}

unsigned kvq::getRotatedChunkTokens(QuantAttr quant, unsigned headDim,
                                    unsigned flush) {
  if (quant.getSpan() == Span::Tokens)
    return quant.getGroup() * headDim <= kRotatedChunkFloats ? quant.getGroup()
                                                             : 0;
  unsigned chunk = std::max(1u, std::min(flush, kRotatedChunkFloats / headDim));
  while (flush % chunk != 0)
    --chunk;
  return chunk;
}

/// Rejects scheme features the kernels do not implement yet, naming them.
static LogicalResult checkSupported(Operation *op, QuantAttr quant,
                                    unsigned headDim, unsigned flush) {
  auto reject = [&](StringRef feature) {
    return op->emitOpError("kvq-compile does not support ")
           << feature << " yet";
  };
  if (quant.getPreRope() && quant.getKeyNorm())
    return reject("pre-RoPE keys with key normalisation");
  // The flush rotates a group of tokens at once in block-local memory.
  if (quant.isRotated() && !getRotatedChunkTokens(quant, headDim, flush))
    return reject("rotate = hadamard with span = tokens groups of more than " +
                  std::to_string(kRotatedChunkFloats) + " elements");
  return success();
}

/// The word offsets of the reordered groups of `layer` (one list per
/// kv-head, concatenated) and the words of one token's codes: each group's
/// codes take whole words, the padding variable sizes cost.
static unsigned layoutReorderedGroups(QuantAttr quant, ModelAttr model,
                                      unsigned layer,
                                      SmallVectorImpl<int32_t> &groupWords) {
  // The verifier has checked that the table is readable and well-formed.
  SmallVector<int64_t> sizes = *quant.getReorder().readSizes();
  unsigned groups = model.getHeadDim() / quant.getGroup(), wordsPerToken = 0;
  for (unsigned head = 0; head < model.getKvHeads(); ++head) {
    uint64_t word = 0;
    for (unsigned g = 0; g < groups; ++g) {
      groupWords.push_back(int32_t(word));
      word += quant.getGroupCodeBits(
                  sizes[(uint64_t(layer) * model.getKvHeads() + head) * groups +
                        g]) /
              32;
    }
    wordsPerToken = std::max(wordsPerToken, unsigned(word));
  }
  return wordsPerToken;
}

static SliceLayout computeSlice(const LayerScheme &layer, unsigned index,
                                ModelAttr model, unsigned pageTokens,
                                unsigned dtypeBytes) {
  SliceLayout slice;
  slice.scheme = layer.scheme;
  slice.quant = layer.getQuant();
  slice.codesFrom = layer.codesFrom;
  unsigned dim = model.getHeadDim();
  if (!slice.quant) {
    slice.sliceBytes = llvm::alignTo(uint64_t(pageTokens) * dim * dtypeBytes,
                                     kLayoutAlignment);
    return slice;
  }
  QuantAttr quant = slice.quant;
  slice.wordsPerGroup = quant.getGroupCodeBits(quant.getGroup()) / 32;
  if (quant.getSpan() == Span::Channels) {
    slice.groupsPerToken = dim / quant.getGroup();
    slice.groupsPerPage = pageTokens * slice.groupsPerToken;
  } else {
    slice.groupsPerPage = pageTokens / quant.getGroup() * dim;
  }
  slice.paramBytes = quant.getParamBits() / 8;
  uint64_t paramArray = llvm::alignTo(
      uint64_t(slice.groupsPerPage) * slice.paramBytes, kLayoutAlignment);
  uint64_t codeWords = uint64_t(slice.groupsPerPage) * slice.wordsPerGroup;
  if (quant.getReorder()) {
    slice.wordsPerGroup = 0;
    slice.wordsPerToken =
        layoutReorderedGroups(quant, model, index, slice.groupWords);
    codeWords = uint64_t(pageTokens) * slice.wordsPerToken;
  }
  // A layer that reuses another layer's codes stores none.
  if (!slice.sharesCodes())
    slice.codesBytes = llvm::alignTo(codeWords * 4, kLayoutAlignment);
  slice.scalesOffset = slice.codesBytes;
  slice.sliceBytes = slice.scalesOffset + paramArray;
  if (quant.getMode() != Mode::Sym) {
    slice.zerosOffset = slice.sliceBytes;
    slice.sliceBytes += paramArray;
  }
  return slice;
}

template <typename TensorOpT>
static FailureOr<TensorLayout> computeTensor(TensorOpT op, ModelAttr model,
                                             unsigned pageTokens,
                                             unsigned dtypeBytes) {
  TensorLayout tensor;
  tensor.window = op.getWindow();
  tensor.windowCapacity =
      tensor.window.getRecent() + tensor.window.getFlush() - 1;
  for (auto [index, layer] : llvm::enumerate(op.getLayerSchemes())) {
    // Layers append in order, so an owner after its sharer would not have
    // flushed the tokens the sharer attends to yet.
    if (layer.codesFrom && *layer.codesFrom > index)
      return op.emitOpError("kvq-compile supports code sharing only with an "
                            "earlier layer; layer ")
             << index << " reuses layer " << *layer.codesFrom;
    if (QuantAttr quant = layer.getQuant())
      if (failed(checkSupported(op, quant, model.getHeadDim(),
                                tensor.window.getFlush())))
        return failure();
    tensor.layerOffsets.push_back(tensor.pageBytes);
    tensor.layers.push_back(
        computeSlice(layer, index, model, pageTokens, dtypeBytes));
    tensor.pageBytes +=
        uint64_t(model.getKvHeads()) * tensor.layers.back().sliceBytes;
  }
  for (auto [index, slice] : llvm::enumerate(tensor.layers)) {
    if (!slice.codesFrom)
      continue;
    unsigned owner = *slice.codesFrom;
    slice.codesLayerDelta = int64_t(tensor.layerOffsets[owner]) -
                            int64_t(tensor.layerOffsets[index]);
    slice.codesHeadDelta =
        int64_t(tensor.layers[owner].sliceBytes) - int64_t(slice.sliceBytes);
  }
  return tensor;
}

/// The pools' layout (docs/KernelABI.md, "Outlier pools"), after checking
/// what tracking relies on.
static FailureOr<PoolLayoutAttr> computePoolLayout(CacheOp cache) {
  PoolAttr pool = cache.getPoolAttr();
  if (!pool)
    return PoolLayoutAttr();
  // The tracker takes a token out of keys and values at the same flush.
  WindowAttr keys = cache.getKeys().getWindow();
  WindowAttr values = cache.getValues().getWindow();
  if (keys != values)
    return cache.emitOpError("kvq-compile supports outlier pools only when "
                             "keys and values have the same window, got ")
           << keys << " and " << values;
  for (auto schemes :
       {cache.getKeys().getLayerSchemes(), cache.getValues().getLayerSchemes()})
    for (auto [index, layer] : llvm::enumerate(schemes))
      if (layer.codesFrom && index >= pool.getFirstLayer())
        return cache.emitOpError("kvq-compile does not support outlier pools "
                                 "in code-sharing layers; layer ")
               << index << " reuses layer " << *layer.codesFrom;
  // Pool entries are attended as stored, unrotated.
  for (auto [index, layer] : llvm::enumerate(cache.getKeys().getLayerSchemes()))
    if (QuantAttr quant = layer.getQuant();
        quant && quant.getPreRope() && index >= pool.getFirstLayer())
      return cache.emitOpError("kvq-compile does not support outlier pools "
                               "with pre-RoPE keys (layer ")
             << index << ")";
  unsigned entries = pool.getCapacity() + pool.getExtra();
  return PoolLayoutAttr::get(cache.getContext(), pool.getCapacity(),
                             pool.getExtra(), pool.getFirstLayer(), entries,
                             entries + PoolLayoutAttr::kHeaderWords);
}

SliceTables kvq::getSliceTables(const SliceLayout &slice, ModelAttr model,
                                unsigned layer) {
  SliceTables tables;
  QuantAttr quant = slice.quant;
  if (!quant)
    return tables;
  unsigned heads = model.getKvHeads(), dim = model.getHeadDim();
  unsigned groups =
      quant.getSpan() == Span::Channels ? dim / quant.getGroup() : dim;
  // Cuts the layer's rows out of a [layers][kv-heads][row] table.
  auto cut = [&](ArrayRef<int64_t> table, unsigned row) {
    return SmallVector<int32_t>(ArrayRef(table).slice(
        uint64_t(layer) * heads * row, uint64_t(heads) * row));
  };
  // The verifier has checked that the tables are readable and well-formed.
  if (ReorderAttr reorder = quant.getReorder()) {
    tables.perm = cut(*reorder.readPerm(), dim);
    tables.sizes = cut(*reorder.readSizes(), groups);
    tables.groupWords = slice.groupWords;
  }
  if (quant.getClipTable()) {
    SmallVector<double> clips = *quant.readClipTable();
    for (double clip : ArrayRef(clips).slice(uint64_t(layer) * heads * groups,
                                             uint64_t(heads) * groups))
      tables.clips.push_back(float(clip));
    tables.clipsPerHead = groups;
  }
  return tables;
}

TargetAttr kvq::getCacheTarget(CacheOp cache) {
  if (auto target = cache->getAttrOfType<TargetAttr>(TargetAttr::getAttrName()))
    return target;
  return TargetAttr::getDefault(cache.getContext());
}

/// The step of the split sizes the runtime may plan: 16 tokens (a matrix
/// tile) and a whole number of every token-spanning group, so that each
/// split starts on a group and the kernels' block buffers hold no partial
/// block; all of split_tokens where no such step divides it.
static unsigned computeSplitGranule(const CacheLayout &layout) {
  uint64_t granule = 16;
  for (const TensorLayout *tensor : {&layout.keys, &layout.values})
    for (const SliceLayout &slice : tensor->layers)
      if (slice.isQuantized() && slice.quant.getSpan() == Span::Tokens)
        granule = std::lcm<uint64_t>(granule, slice.quant.getGroup());
  return layout.splitTokens % granule ? layout.splitTokens : unsigned(granule);
}

/// The host's capacity as a whole number of granules (rounded down, at
/// least one), so that every size the runtime plans suits both backends.
static unsigned alignHostSplitTokens(unsigned hostSplitTokens,
                                     unsigned granule) {
  return std::max(granule, hostSplitTokens / granule * granule);
}

FailureOr<CacheLayout> kvq::computeCacheLayout(CacheOp cache) {
  if (failed(cache.verifyTablesPresent()))
    return failure();
  CacheLayout layout;
  layout.model = cache.getModel();
  layout.pageTokens = cache.getPage();
  TargetAttr target = getCacheTarget(cache);
  layout.splitTokens = target.getSplitTokens();
  layout.dtypeBytes = layout.model.getDtype().getIntOrFloatBitWidth() / 8;
  FailureOr<TensorLayout> keys = computeTensor(
      cache.getKeys(), layout.model, layout.pageTokens, layout.dtypeBytes);
  FailureOr<TensorLayout> values = computeTensor(
      cache.getValues(), layout.model, layout.pageTokens, layout.dtypeBytes);
  if (failed(keys) || failed(values))
    return failure();
  layout.keys = std::move(*keys);
  layout.values = std::move(*values);
  FailureOr<PoolLayoutAttr> pool = computePoolLayout(cache);
  if (failed(pool))
    return failure();
  layout.pool = *pool;
  layout.splitGranule = computeSplitGranule(layout);
  layout.hostSplitTokens =
      alignHostSplitTokens(target.getHostSplitTokens(), layout.splitGranule);
  return layout;
}

//===----------------------------------------------------------------------===//
// The #kvq.layout attribute
//===----------------------------------------------------------------------===//

static SliceLayoutAttr getSliceAttr(const SliceLayout &slice, uint64_t offset,
                                    MLIRContext *ctx) {
  return SliceLayoutAttr::get(
      ctx, offset, slice.sliceBytes, slice.wordsPerGroup, slice.groupsPerToken,
      slice.groupsPerPage, slice.paramBytes, slice.codesBytes,
      slice.scalesOffset, slice.zerosOffset,
      slice.codesFrom ? int64_t(*slice.codesFrom) : int64_t(-1),
      slice.codesLayerDelta, slice.codesHeadDelta, slice.wordsPerToken,
      slice.hasReorder() ? DenseI32ArrayAttr::get(ctx, slice.groupWords)
                         : DenseI32ArrayAttr());
}

static TensorLayoutAttr getTensorAttr(const TensorLayout &tensor,
                                      MLIRContext *ctx) {
  SmallVector<Attribute> slices;
  for (auto [slice, offset] : llvm::zip(tensor.layers, tensor.layerOffsets))
    slices.push_back(getSliceAttr(slice, offset, ctx));
  return TensorLayoutAttr::get(ctx, tensor.windowCapacity, tensor.pageBytes,
                               ArrayAttr::get(ctx, slices));
}

LayoutAttr kvq::getLayoutAttr(const CacheLayout &layout, MLIRContext *ctx) {
  return LayoutAttr::get(ctx, layout.pageTokens, layout.splitTokens,
                         layout.hostSplitTokens, layout.splitGranule,
                         layout.dtypeBytes, getTensorAttr(layout.keys, ctx),
                         getTensorAttr(layout.values, ctx), layout.pool);
}

static SliceLayout decodeSlice(SliceLayoutAttr attr, const LayerScheme &layer) {
  SliceLayout slice;
  slice.scheme = layer.scheme;
  slice.quant = layer.getQuant();
  slice.wordsPerGroup = attr.getWordsPerGroup();
  slice.groupsPerToken = attr.getGroupsPerToken();
  slice.groupsPerPage = attr.getGroupsPerPage();
  slice.paramBytes = attr.getParamBytes();
  slice.codesBytes = attr.getCodesBytes();
  slice.scalesOffset = attr.getScalesOffset();
  slice.zerosOffset = attr.getZerosOffset();
  slice.sliceBytes = attr.getSliceBytes();
  if (attr.getCodesFrom() >= 0)
    slice.codesFrom = unsigned(attr.getCodesFrom());
  slice.codesLayerDelta = attr.getCodesLayerDelta();
  slice.codesHeadDelta = attr.getCodesHeadDelta();
  slice.wordsPerToken = attr.getWordsPerToken();
  if (DenseI32ArrayAttr words = attr.getGroupWords())
    slice.groupWords.assign(words.asArrayRef().begin(),
                            words.asArrayRef().end());
  return slice;
}

/// Reordered schemes, and only they, have one word offset per group of each
/// kv-head, and the codes of a page fit the slice's codes.
static bool fitsReorder(SliceLayoutAttr slice, QuantAttr quant,
                        ModelAttr model) {
  if (!quant || !quant.getReorder())
    return !slice.getGroupWords();
  return slice.getGroupWords() &&
         slice.getGroupWords().size() ==
             int64_t(model.getKvHeads()) * slice.getGroupsPerToken() &&
         uint64_t(slice.getWordsPerToken()) * 4 *
                 (slice.getGroupsPerPage() / slice.getGroupsPerToken()) <=
             (slice.getCodesFrom() >= 0 ? UINT64_MAX : slice.getCodesBytes());
}

template <typename TensorOpT>
static FailureOr<TensorLayout> decodeTensor(TensorOpT op, TensorLayoutAttr attr,
                                            ModelAttr model) {
  SmallVector<LayerScheme> schemes = op.getLayerSchemes();
  if (schemes.size() != attr.getSlices().size())
    return op.emitOpError("kvq.layout has ")
           << attr.getSlices().size() << " slices for " << schemes.size()
           << " layers";
  TensorLayout tensor;
  tensor.window = op.getWindow();
  tensor.windowCapacity = attr.getWindowCapacity();
  tensor.pageBytes = attr.getPageBytes();
  for (auto [index, layer] : llvm::enumerate(schemes)) {
    SliceLayoutAttr slice = attr.getSlice(index);
    // Every kv-head's slice lies in the page (the attribute alone does not
    // know the number of kv-heads).
    if (slice.getOffset() +
                uint64_t(model.getKvHeads()) * slice.getSliceBytes() >
            tensor.pageBytes ||
        (slice.getCodesFrom() >= 0) != layer.codesFrom.has_value() ||
        !fitsReorder(slice, layer.getQuant(), model))
      return op.emitOpError("kvq.layout does not fit layer ") << index;
    tensor.layerOffsets.push_back(slice.getOffset());
    tensor.layers.push_back(decodeSlice(slice, layer));
  }
  return tensor;
}

FailureOr<CacheLayout> kvq::getCacheLayout(CacheOp cache) {
  auto attr = cache->getAttrOfType<LayoutAttr>(LayoutAttr::getAttrName());
  if (!attr)
    return cache.emitOpError("has no kvq.layout (run kvq-assign-layout)");
  CacheLayout layout;
  layout.model = cache.getModel();
  layout.pageTokens = attr.getPageTokens();
  layout.splitTokens = attr.getSplitTokens();
  layout.hostSplitTokens = attr.getHostSplitTokens();
  layout.splitGranule = attr.getSplitGranule();
  layout.dtypeBytes = attr.getDtypeBytes();
  if (layout.pageTokens != cache.getPage())
    return cache.emitOpError("kvq.layout is for another page size");
  FailureOr<TensorLayout> keys =
      decodeTensor(cache.getKeys(), attr.getKeys(), layout.model);
  FailureOr<TensorLayout> values =
      decodeTensor(cache.getValues(), attr.getValues(), layout.model);
  if (failed(keys) || failed(values))
    return failure();
  layout.keys = std::move(*keys);
  layout.values = std::move(*values);
  layout.pool = attr.getPool();
  if (static_cast<bool>(layout.pool) != static_cast<bool>(cache.getPoolAttr()))
    return cache.emitOpError("kvq.layout does not match the cache's pool");
  return layout;
}
