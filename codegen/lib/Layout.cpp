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

/// What the page layout needs of layer `index`'s scheme.
static abi::SliceScheme getSliceScheme(const LayerScheme &layer, unsigned index,
                                       ModelAttr model) {
  abi::SliceScheme scheme;
  scheme.CodesFrom = layer.codesFrom ? int64_t(*layer.codesFrom) : -1;
  QuantAttr quant = layer.getQuant();
  if (!quant)
    return scheme;
  scheme.Quantized = true;
  scheme.Bits = quant.getBits();
  scheme.Group = quant.getGroup();
  scheme.SpanTokens = quant.getSpan() == Span::Tokens;
  scheme.Sym = quant.getMode() == Mode::Sym;
  scheme.ParamBytes = quant.getParamBits() / 8;
  if (quant.getReorder()) {
    // The verifier has checked that the table is readable and well-formed.
    SmallVector<int64_t> sizes = *quant.getReorder().readSizes();
    uint64_t row =
        uint64_t(model.getKvHeads()) * (model.getHeadDim() / quant.getGroup());
    scheme.ReorderSizes.assign(sizes.begin() + index * row,
                               sizes.begin() + (index + 1) * row);
  }
  return scheme;
}

template <typename TensorOpT>
static FailureOr<TensorLayout> computeTensor(TensorOpT op, ModelAttr model,
                                             unsigned pageTokens,
                                             unsigned dtypeBytes) {
  TensorLayout tensor;
  tensor.window = op.getWindow();
  tensor.windowCapacity = unsigned(abi::getWindowCapacity(
      tensor.window.getRecent(), tensor.window.getFlush()));
  abi::PageShape shape{pageTokens, model.getKvHeads(), model.getHeadDim(),
                       dtypeBytes};
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
    SliceLayout slice;
    static_cast<abi::SliceLayout &>(slice) =
        abi::computeSliceLayout(getSliceScheme(layer, index, model), shape);
    slice.scheme = layer.scheme;
    slice.quant = layer.getQuant();
    tensor.layers.push_back(std::move(slice));
  }
  tensor.pageBytes = abi::placeSlices(tensor.layers, model.getKvHeads());
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
  abi::PoolLayout layout = abi::computePoolLayout(
      pool.getCapacity(), pool.getExtra(), pool.getFirstLayer());
  return PoolLayoutAttr::get(cache.getContext(), layout.Capacity, layout.Extra,
                             layout.FirstLayer, layout.Entries,
                             layout.IndexWords);
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

static TensorLayoutAttr getTensorAttr(const TensorLayout &tensor,
                                      MLIRContext *ctx) {
  SmallVector<Attribute> slices;
  for (const SliceLayout &slice : tensor.layers)
    slices.push_back(SliceLayoutAttr::get(ctx, slice));
  return TensorLayoutAttr::get(ctx, tensor.windowCapacity, tensor.pageBytes,
                               ArrayAttr::get(ctx, slices));
}

LayoutAttr kvq::getLayoutAttr(const CacheLayout &layout, MLIRContext *ctx) {
  return LayoutAttr::get(ctx, layout.pageTokens, layout.splitTokens,
                         layout.hostSplitTokens, layout.splitGranule,
                         layout.dtypeBytes, getTensorAttr(layout.keys, ctx),
                         getTensorAttr(layout.values, ctx), layout.pool);
}

/// The layout of `op`'s layers, which `attr` must spell: the layout their
/// schemes give (the rule the runtime holds manifests to), or an error at
/// `op` naming the first layer and field that differ.
template <typename TensorOpT>
static FailureOr<TensorLayout> checkTensor(TensorOpT op, TensorLayoutAttr attr,
                                           ModelAttr model, unsigned pageTokens,
                                           unsigned dtypeBytes) {
  FailureOr<TensorLayout> want =
      computeTensor(op, model, pageTokens, dtypeBytes);
  if (failed(want))
    return failure();
  if (attr.getSlices().size() != want->layers.size())
    return op.emitOpError("kvq.layout has ")
           << attr.getSlices().size() << " slices for " << want->layers.size()
           << " layers";
  for (auto [index, slice] : llvm::enumerate(want->layers))
    if (std::string difference =
            abi::describeDifference(attr.getSlice(index).getLayout(), slice);
        !difference.empty())
      return op.emitOpError("kvq.layout is not the layout of layer ")
             << index << "'s scheme: " << difference;
  if (attr.getPageBytes() != want->pageBytes ||
      attr.getWindowCapacity() != want->windowCapacity)
    return op.emitOpError("kvq.layout's page_bytes or window_capacity is not "
                          "its schemes'");
  return want;
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
  if (layout.pageTokens != cache.getPage() ||
      layout.dtypeBytes != layout.model.getDtype().getIntOrFloatBitWidth() / 8)
    return cache.emitOpError(
        "kvq.layout is for another page size or model dtype");
  FailureOr<TensorLayout> keys =
      checkTensor(cache.getKeys(), attr.getKeys(), layout.model,
                  layout.pageTokens, layout.dtypeBytes);
  FailureOr<TensorLayout> values =
      checkTensor(cache.getValues(), attr.getValues(), layout.model,
                  layout.pageTokens, layout.dtypeBytes);
  if (failed(keys) || failed(values))
    return failure();
  layout.keys = std::move(*keys);
  layout.values = std::move(*values);
  layout.pool = attr.getPool();
  if (static_cast<bool>(layout.pool) != static_cast<bool>(cache.getPoolAttr()))
    return cache.emitOpError("kvq.layout does not match the cache's pool");
  return layout;
}
