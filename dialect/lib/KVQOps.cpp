//===- KVQOps.cpp - kvq ops and their verifiers ---------------------------===//
//
// The verifiers here check every rule that relates a scheme to the model
// shape, the windows, the page size or other layers. Each rejects the spec
// at the op that breaks the rule.
//
//===----------------------------------------------------------------------===//

#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace kvq;

#define GET_OP_CLASSES
#include "kvq/Dialect/KVQ/KVQOps.cpp.inc"

//===----------------------------------------------------------------------===//
// CacheOp
//===----------------------------------------------------------------------===//

KeysOp CacheOp::getKeys() {
  auto ops = getBody().getOps<KeysOp>();
  return ops.empty() ? KeysOp() : *ops.begin();
}

ValuesOp CacheOp::getValues() {
  auto ops = getBody().getOps<ValuesOp>();
  return ops.empty() ? ValuesOp() : *ops.begin();
}

/// Longest cache name accepted: kernel and symbol names add a suffix to it,
/// and a directory name may hold 255 bytes.
static constexpr size_t kMaxCacheNameChars = 128;

/// Whether `name` is usable as an artifact directory name, an LLVM symbol
/// and a PTX identifier (which allows no `.` or `-`) once a kernel's suffix
/// is appended: a letter or `_`, then letters, digits and `_`.
static bool isCacheName(StringRef name) {
  auto isWordChar = [](char c) { return llvm::isAlnum(c) || c == '_'; };
  return !name.empty() && name.size() <= kMaxCacheNameChars &&
         !llvm::isDigit(name.front()) && llvm::all_of(name, isWordChar);
}

/// The rotation style of the first pre-RoPE key scheme in `body`, if any.
static RopeAttr getFirstPreRope(Block &body) {
  for (Operation &op : body)
    if (auto quant = dyn_cast_or_null<QuantAttr>(op.getAttr("scheme")))
      if (RopeAttr rope = quant.getPreRope())
        return rope;
  return RopeAttr();
}

ChannelOrder CacheOp::getChannelOrder() {
  ChannelOrder order = getModel().getChannelOrder();
  if (order != ChannelOrder::Any)
    return order;
  if (RopeAttr rope = getFirstPreRope(getKeys().getBody().front()))
    return rope.getStyle() == RopeStyle::Half ? ChannelOrder::Half
                                              : ChannelOrder::Interleaved;
  return ChannelOrder::Any;
}

LogicalResult CacheOp::verify() {
  StringRef name = getSymName();
  if (isCacheName(name))
    return success();
  // Quoted as the parser reads it, and shortened.
  std::string quoted;
  llvm::raw_string_ostream os(quoted);
  llvm::printEscapedString(name.take_front(64), os);
  return emitOpError("name must be an identifier of at most ")
         << kMaxCacheNameChars
         << " characters (a letter or '_', then letters, digits or '_': it "
            "names the artifact directory, the kernels' symbols and PTX "
            "entries), got @\""
         << quoted << (name.size() > 64 ? "...\"" : "\"");
}

LogicalResult CacheOp::verifyRegions() {
  unsigned numKeys = 0, numValues = 0;
  for (Operation &op : getBody().front()) {
    if (isa<KeysOp>(op))
      ++numKeys;
    else if (isa<ValuesOp>(op))
      ++numValues;
    else
      return op.emitOpError("is not allowed in a kvq.cache");
  }
  if (numKeys != 1 || numValues != 1)
    return emitOpError("needs exactly one kvq.keys and one kvq.values, got ")
           << numKeys << " and " << numValues;
  if (PoolAttr pool = getPoolAttr()) {
    if (pool.getFirstLayer() >= getModel().getLayers())
      return emitOpError("outlier pool first_layer ")
             << pool.getFirstLayer() << " is past the last layer "
             << getModel().getLayers() - 1;
    if (getKeys().getWindow().getFlush() != getValues().getWindow().getFlush())
      return emitOpError("an outlier pool needs keys and values to flush "
                         "together, got flush units ")
             << getKeys().getWindow().getFlush() << " and "
             << getValues().getWindow().getFlush();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Scheme checks against the model, windows and page
//===----------------------------------------------------------------------===//

namespace {
/// What the scheme checks of one kvq.keys or kvq.values need to know.
struct TensorContext {
  StringRef tensor;
  bool isKeys;
  ModelAttr model;
  WindowAttr window;
  int64_t page;
};
} // namespace

/// Groups per token of one (layer, kv-head): D/G for span = channels, and one
/// per channel for span = tokens.
static int64_t getGroupsPerToken(QuantAttr quant, ModelAttr model) {
  return quant.getSpan() == Span::Channels
             ? model.getHeadDim() / quant.getGroup()
             : model.getHeadDim();
}

static LogicalResult checkTableShape(Operation *op, StringRef what,
                                     ElementsAttr table,
                                     ArrayRef<int64_t> expected) {
  auto type = dyn_cast<ShapedType>(table.getType());
  if (!type || type.getShape() != expected) {
    auto diag = op->emitOpError() << what << " table must have shape ";
    llvm::interleave(expected, diag, "x");
    return diag;
  }
  return success();
}

static LogicalResult checkReorder(Operation *op, QuantAttr quant,
                                  ModelAttr model) {
  ReorderAttr reorder = quant.getReorder();
  if (quant.getSpan() != Span::Channels)
    return op->emitOpError("channel reorder needs span = channels");
  int64_t layers = model.getLayers(), heads = model.getKvHeads(),
          dim = model.getHeadDim(), groups = getGroupsPerToken(quant, model);
  if (failed(checkTableShape(op, "reorder perm", reorder.getPerm(),
                             {layers, heads, dim})) ||
      failed(checkTableShape(op, "reorder sizes", reorder.getSizes(),
                             {layers, heads, groups})))
    return failure();
  if (isTableTooLarge(reorder.getPerm()))
    return op->emitOpError("reorder tables may hold at most ")
           << kMaxTableElements << " elements";
  // A `dense_resource` table may not be loaded yet (bytecode reads resources
  // after the IR) or be elided: its contents are checked where present, and
  // consumers that need them call verifyTablesPresent().
  FailureOr<SmallVector<int64_t>> perm = reorder.readPerm();
  FailureOr<SmallVector<int64_t>> sizes = reorder.readSizes();
  if (failed(perm) || failed(sizes))
    return success();
  for (int64_t slice = 0; slice < layers * heads; ++slice) {
    int64_t layer = slice / heads, head = slice % heads;
    SmallVector<bool> seen(dim, false);
    for (int64_t channel : ArrayRef(*perm).slice(slice * dim, dim)) {
      if (channel < 0 || channel >= dim || seen[channel])
        return op->emitOpError("reorder perm of layer ")
               << layer << ", kv-head " << head
               << " is not a permutation of [0, " << dim << ")";
      seen[channel] = true;
    }
    int64_t total = 0;
    for (int64_t size : ArrayRef(*sizes).slice(slice * groups, groups)) {
      if (size <= 0)
        return op->emitOpError("reorder group sizes must be positive");
      total += size;
    }
    if (total != dim)
      return op->emitOpError("reorder group sizes of layer ")
             << layer << ", kv-head " << head << " sum to " << total
             << ", not head_dim " << dim;
  }
  return success();
}

/// Pre-RoPE keys are rotated by the kernel in the rope's pairing, which is
/// then the order of the channels the cache is given: a stated channel order
/// must be the same.
static LogicalResult checkPreRopeOrder(Operation *op, RopeAttr rope,
                                       ModelAttr model) {
  ChannelOrder order = model.getChannelOrder();
  if (!rope || order == ChannelOrder::Any)
    return success();
  bool half = rope.getStyle() == RopeStyle::Half;
  if (half == (order == ChannelOrder::Half))
    return success();
  return op->emitOpError("pre_rope rotates in ")
         << stringifyRopeStyle(rope.getStyle())
         << " order, the model's channel_order is "
         << stringifyChannelOrder(order);
}

/// The keys reach the cache in one channel order, so every pre-RoPE layer
/// rotates in the same style.
static LogicalResult checkOnePreRopeStyle(Block &body) {
  RopeAttr first = getFirstPreRope(body);
  for (Operation &op : body) {
    auto quant = dyn_cast_or_null<QuantAttr>(op.getAttr("scheme"));
    RopeAttr rope = quant ? quant.getPreRope() : RopeAttr();
    if (rope && rope.getStyle() != first.getStyle())
      return op.emitOpError("pre_rope rotates in ")
             << stringifyRopeStyle(rope.getStyle())
             << " order where an earlier layer rotates in "
             << stringifyRopeStyle(first.getStyle())
             << " order: a cache takes its keys in one channel order";
  }
  return success();
}

static LogicalResult checkScheme(Operation *op, Attribute scheme,
                                 const TensorContext &ctx) {
  auto quant = dyn_cast<QuantAttr>(scheme);
  if (!quant)
    return success();
  unsigned dim = ctx.model.getHeadDim(), group = quant.getGroup();
  unsigned flush = ctx.window.getFlush();
  if (quant.getSpan() == Span::Channels && dim % group != 0)
    return op->emitOpError("group size ")
           << group << " does not divide head_dim " << dim
           << " (span = channels)";
  if (quant.getSpan() == Span::Tokens && flush % group != 0)
    return op->emitOpError("flush unit ")
           << flush << " of the " << ctx.tensor
           << " is not a multiple of the group size " << group
           << " (span = tokens groups whole flushes)";
  if (!ctx.isKeys && (quant.getKeyNorm() || quant.getPreRope()))
    return op->emitOpError("key_norm and pre_rope apply to keys only");
  if (RopeAttr rope = quant.getPreRope(); rope && rope.getDims() > dim)
    return op->emitOpError("pre_rope rotates ")
           << rope.getDims() << " dims, more than head_dim " << dim;
  if (failed(checkPreRopeOrder(op, quant.getPreRope(), ctx.model)))
    return failure();
  if (quant.isRotated() && !llvm::isPowerOf2_32(dim))
    return op->emitOpError("rotate = hadamard needs head_dim a power of two, "
                           "got ")
           << dim;
  if (quant.isRotated())
    if (auto cache = op->getParentOfType<CacheOp>(); cache.getPoolAttr())
      return op->emitOpError("rotate = hadamard cannot be combined with OTT "
                             "outlier pools: pooled tokens are kept "
                             "unrotated");
  if (auto table = quant.getClipTable())
    if (failed(checkTableShape(op, "clip", table,
                               {ctx.model.getLayers(), ctx.model.getKvHeads(),
                                getGroupsPerToken(quant, ctx.model)})))
      return failure();
  if (quant.getReorder())
    return checkReorder(op, quant, ctx.model);
  return success();
}

/// Two layers may share codes only if their codes mean the same thing.
static LogicalResult checkSharing(Operation *op, unsigned layer,
                                  Attribute scheme, unsigned owner,
                                  Attribute ownerScheme, unsigned numLayers) {
  if (owner >= numLayers)
    return op->emitOpError("layer ")
           << layer << " would reuse the codes of layer " << owner
           << ", past the last layer " << numLayers - 1;
  auto quant = dyn_cast<QuantAttr>(scheme);
  auto ownerQuant = dyn_cast<QuantAttr>(ownerScheme);
  if (!quant || !ownerQuant)
    return op->emitOpError("layer ")
           << layer << " cannot share codes with layer " << owner
           << ": full-precision layers have no codes";
  if (quant.getBits() != ownerQuant.getBits() ||
      quant.getNumLevels() != ownerQuant.getNumLevels())
    return op->emitOpError("layer ")
           << layer << " (" << quant.getBits()
           << "-bit) cannot share codes with layer " << owner << " ("
           << ownerQuant.getBits() << "-bit): bit-widths differ";
  if (quant.getSpan() != ownerQuant.getSpan() ||
      quant.getGroup() != ownerQuant.getGroup() ||
      quant.getMode() != ownerQuant.getMode() ||
      quant.getReorder() != ownerQuant.getReorder())
    return op->emitOpError("layer ")
           << layer << " cannot share codes with layer " << owner
           << ": grouping or mode differs";
  if (quant.getRotate() != ownerQuant.getRotate() ||
      quant.getRotateSeed() != ownerQuant.getRotateSeed())
    return op->emitOpError("layer ")
           << layer << " cannot share codes with layer " << owner
           << ": their rotations differ";
  return success();
}

LogicalResult CacheOp::verifyTablesPresent() {
  for (Operation &op : getBody().front())
    for (Operation &layer : op.getRegion(0).front()) {
      auto quant = dyn_cast<QuantAttr>(layer.getAttr("scheme"));
      if (!quant)
        continue;
      if (ReorderAttr reorder = quant.getReorder();
          reorder &&
          (failed(reorder.readPerm()) || failed(reorder.readSizes())))
        return layer.emitOpError("reorder tables must hold i32 or i64 values, "
                                 "with their resource data present");
    }
  return success();
}

//===----------------------------------------------------------------------===//
// KeysOp, ValuesOp
//===----------------------------------------------------------------------===//

/// Checks a schedule of kvq.layers ranges and fills one scheme per layer.
static LogicalResult verifyRanges(Operation *tensorOp, ArrayRef<LayersOp> ops,
                                  unsigned numLayers,
                                  SmallVectorImpl<Attribute> &schemes) {
  SmallVector<Operation *> owners(numLayers, nullptr);
  for (LayersOp op : ops) {
    uint64_t begin = op.getBegin(), end = op.getEnd();
    if (begin >= end)
      return op.emitOpError("layer range [")
             << begin << ", " << end << ") is empty";
    if (end > numLayers)
      return op.emitOpError("layer range [")
             << begin << ", " << end << ") goes past the last layer "
             << numLayers - 1;
    for (uint64_t layer = begin; layer < end; ++layer) {
      if (owners[layer]) {
        auto other = cast<LayersOp>(owners[layer]);
        return op.emitOpError("layer range [")
               << begin << ", " << end << ") overlaps [" << other.getBegin()
               << ", " << other.getEnd() << ") at layer " << layer;
      }
      owners[layer] = op;
      schemes[layer] = op.getScheme();
    }
  }
  for (unsigned layer = 0; layer < numLayers; ++layer)
    if (!owners[layer])
      return tensorOp->emitOpError("layer ")
             << layer << " is not covered by any kvq.layers range";
  return success();
}

/// Checks an expanded list of kvq.layer ops and fills one scheme per layer.
static LogicalResult verifyExpanded(Operation *tensorOp, ArrayRef<LayerOp> ops,
                                    unsigned numLayers,
                                    SmallVectorImpl<Attribute> &schemes) {
  if (ops.size() != numLayers)
    return tensorOp->emitOpError("expanded schedule needs one kvq.layer per "
                                 "layer: expected ")
           << numLayers << ", got " << ops.size();
  for (auto [layer, constOp] : llvm::enumerate(ops)) {
    LayerOp op = constOp;
    if (op.getIndex() != layer)
      return op.emitOpError("expected layer ")
             << layer << " at this position, got " << op.getIndex();
    schemes[layer] = op.getScheme();
  }
  return success();
}

template <typename TensorOpT>
static LogicalResult verifyTensorOp(TensorOpT tensorOp, bool isKeys) {
  auto cache = tensorOp->template getParentOfType<CacheOp>();
  TensorContext ctx{isKeys ? "keys" : "values", isKeys, cache.getModel(),
                    tensorOp.getWindow(),
                    static_cast<int64_t>(cache.getPage())};
  unsigned numLayers = ctx.model.getLayers();
  if (ctx.page % ctx.window.getFlush() != 0)
    return tensorOp.emitOpError("page size ")
           << ctx.page << " is not a multiple of the " << ctx.tensor
           << " flush unit " << ctx.window.getFlush();

  Block &body = tensorOp.getBody().front();
  auto ranges = llvm::to_vector(body.template getOps<LayersOp>());
  auto layers = llvm::to_vector(body.template getOps<LayerOp>());
  if (!ranges.empty() && !layers.empty())
    return tensorOp.emitOpError("mixes kvq.layers ranges with expanded "
                                "kvq.layer ops");
  if (!layers.empty() && tensorOp.getShareAttr())
    return tensorOp.emitOpError("an expanded schedule states sharing per "
                                "layer ('codes from'), not with 'share'");
  SmallVector<Attribute> schemes(numLayers);
  if (failed(layers.empty()
                 ? verifyRanges(tensorOp, ranges, numLayers, schemes)
                 : verifyExpanded(tensorOp, layers, numLayers, schemes)))
    return failure();

  for (Operation &op : body)
    if (failed(checkScheme(&op, op.getAttr("scheme"), ctx)))
      return failure();
  if (failed(checkOnePreRopeStyle(body)))
    return failure();

  if (ShareAttr share = tensorOp.getShareAttr()) {
    for (unsigned layer = 0; layer < numLayers; ++layer)
      if (std::optional<unsigned> owner = share.getCodeOwner(layer))
        if (failed(checkSharing(
                tensorOp, layer, schemes[layer], *owner,
                *owner < numLayers ? schemes[*owner] : Attribute(), numLayers)))
          return failure();
  }
  for (LayerOp op : layers)
    if (std::optional<uint64_t> owner = op.getCodesFrom()) {
      if (*owner == op.getIndex())
        return op.emitOpError("cannot reuse its own codes");
      if (failed(checkSharing(
              op, op.getIndex(), op.getScheme(), *owner,
              *owner < numLayers ? schemes[*owner] : Attribute(), numLayers)))
        return failure();
      if (layers[*owner].getCodesFrom())
        return op.emitOpError("reuses the codes of layer ")
               << *owner << ", which stores no codes of its own";
    }
  return success();
}

template <typename TensorOpT>
static SmallVector<LayerScheme> resolveLayerSchemes(TensorOpT tensorOp) {
  unsigned numLayers =
      tensorOp->template getParentOfType<CacheOp>().getModel().getLayers();
  SmallVector<LayerScheme> result(numLayers);
  for (Operation &op : tensorOp.getBody().front()) {
    if (auto range = dyn_cast<LayersOp>(op)) {
      for (uint64_t l = range.getBegin(); l < range.getEnd(); ++l)
        result[l].scheme = range.getScheme();
    } else if (auto layer = dyn_cast<LayerOp>(op)) {
      result[layer.getIndex()].scheme = layer.getScheme();
      if (std::optional<uint64_t> owner = layer.getCodesFrom())
        result[layer.getIndex()].codesFrom = *owner;
    }
  }
  if (ShareAttr share = tensorOp.getShareAttr())
    for (unsigned layer = 0; layer < numLayers; ++layer)
      result[layer].codesFrom = share.getCodeOwner(layer);
  return result;
}

LogicalResult KeysOp::verifyRegions() { return verifyTensorOp(*this, true); }
LogicalResult ValuesOp::verifyRegions() { return verifyTensorOp(*this, false); }

SmallVector<LayerScheme> KeysOp::getLayerSchemes() {
  return resolveLayerSchemes(*this);
}
SmallVector<LayerScheme> ValuesOp::getLayerSchemes() {
  return resolveLayerSchemes(*this);
}

//===----------------------------------------------------------------------===//
// Kernel ops
//===----------------------------------------------------------------------===//

/// The cache a kernel op names, or an error at the op.
static FailureOr<CacheOp> lookupCache(Operation *op, FlatSymbolRefAttr name,
                                      SymbolTableCollection &symbols) {
  auto cache = symbols.lookupNearestSymbolFrom<CacheOp>(op, name);
  if (!cache)
    return op->emitOpError("names no kvq.cache ") << name;
  return cache;
}

/// Checks that `layers` is a nonempty list of layers of `cache` on which
/// `schemeOf` gives the same value (a kernel implements one scheme).
template <typename KeyFn>
static LogicalResult verifyKernelLayers(Operation *op, CacheOp cache,
                                        ArrayRef<int64_t> layers,
                                        KeyFn schemeOf) {
  if (layers.empty())
    return op->emitOpError("serves no layer");
  unsigned numLayers = cache.getModel().getLayers();
  for (int64_t layer : layers)
    if (layer < 0 || layer >= numLayers)
      return op->emitOpError("layer ")
             << layer << " is not a layer of " << cache.getSymName();
  for (int64_t layer : layers)
    if (schemeOf(layer) != schemeOf(layers.front()))
      return op->emitOpError("layers ")
             << layers.front() << " and " << layer
             << " have different schemes; one kernel serves one scheme";
  return success();
}

/// What a kernel specializes on: the scheme, and how far back the layer
/// whose codes it reads is (0 without sharing).
static std::pair<Attribute, int64_t>
schemeOfLayer(CacheOp cache, TensorKind tensor, int64_t layer) {
  SmallVector<LayerScheme> schemes = tensor == TensorKind::Keys
                                         ? cache.getKeys().getLayerSchemes()
                                         : cache.getValues().getLayerSchemes();
  const LayerScheme &scheme = schemes[layer];
  return {scheme.scheme,
          scheme.codesFrom ? layer - int64_t(*scheme.codesFrom) : 0};
}

CacheOp FlushKernelOp::getCacheOp() {
  return SymbolTable::lookupNearestSymbolFrom<CacheOp>(*this, getCacheAttr());
}

LogicalResult FlushKernelOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<CacheOp> cache = lookupCache(*this, getCacheAttr(), symbols);
  if (failed(cache))
    return failure();
  return verifyKernelLayers(*this, *cache, getLayers(), [&](int64_t l) {
    return schemeOfLayer(*cache, getTensor(), l);
  });
}

template <typename KernelOpT> static CacheOp getKernelCache(KernelOpT op) {
  return SymbolTable::lookupNearestSymbolFrom<CacheOp>(op, op.getCacheAttr());
}

CacheOp KeyNormKernelOp::getCacheOp() { return getKernelCache(*this); }
CacheOp TrackKernelOp::getCacheOp() { return getKernelCache(*this); }
CacheOp AttendKernelOp::getCacheOp() { return getKernelCache(*this); }

LogicalResult
KeyNormKernelOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<CacheOp> cache = lookupCache(*this, getCacheAttr(), symbols);
  if (failed(cache))
    return failure();
  for (int64_t layer : getLayers()) {
    auto quant = dyn_cast_if_present<QuantAttr>(
        layer >= 0 && layer < cache->getModel().getLayers()
            ? schemeOfLayer(*cache, TensorKind::Keys, layer).first
            : Attribute());
    if (!quant || !quant.getKeyNorm())
      return emitOpError("layer ") << layer << " has no key normalisation";
  }
  return verifyKernelLayers(*this, *cache, getLayers(),
                            [](int64_t) { return 0; });
}

LogicalResult TrackKernelOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<CacheOp> cache = lookupCache(*this, getCacheAttr(), symbols);
  if (failed(cache))
    return failure();
  PoolAttr pool = cache->getPoolAttr();
  for (int64_t layer : getLayers())
    if (!pool || layer < int64_t(pool.getFirstLayer()))
      return emitOpError("layer ") << layer << " has no outlier pool";
  return verifyKernelLayers(*this, *cache, getLayers(),
                            [](int64_t) { return 0; });
}

LogicalResult AttendKernelOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<CacheOp> cache = lookupCache(*this, getCacheAttr(), symbols);
  if (failed(cache))
    return failure();
  // Tracked layers (OTT) also attend to their pools.
  PoolAttr pool = cache->getPoolAttr();
  return verifyKernelLayers(*this, *cache, getLayers(), [&](int64_t l) {
    return std::make_tuple(schemeOfLayer(*cache, TensorKind::Keys, l),
                           schemeOfLayer(*cache, TensorKind::Values, l),
                           pool && l >= int64_t(pool.getFirstLayer()));
  });
}

LogicalResult UnpackOp::verify() {
  int64_t lanes = getCodes().getType().getNumElements();
  int64_t streamBits = 32 * getWords().getType().getNumElements();
  int64_t last = int64_t(getOffset()) + (lanes - 1) * int64_t(getStride());
  if (last + getBits() > streamBits)
    return emitOpError("lane ")
           << lanes - 1 << " reads bits [" << last << ", " << last + getBits()
           << ") past the " << streamBits << " bits of its words";
  return success();
}

LogicalResult GroupDotOp::verify() {
  if (getTiles().empty())
    return emitOpError("has no tiles");
  if (getSums().size() != getTiles().size())
    return emitOpError("has ")
           << getSums().size() << " sums for " << getTiles().size() << " tiles";
  if (getDots().size() != getTiles().size())
    return emitOpError("has ")
           << getDots().size() << " dots for " << getTiles().size() << " tiles";
  int64_t group = getCodes().getType().getNumElements();
  for (auto [r, tile] : llvm::enumerate(getTiles())) {
    int64_t length = cast<VectorType>(tile.getType()).getNumElements();
    if (length != group)
      return emitOpError("tile ")
             << r << " has " << length << " elements for a group of " << group
             << " codes";
  }
  return success();
}

LogicalResult PackOp::verify() {
  int64_t streamBits = getCodes().getType().getNumElements() * getBits();
  int64_t words = getWords().getType().getNumElements();
  if (words != llvm::divideCeil(streamBits, 32))
    return emitOpError("packs ")
           << streamBits << " bits of codes into " << words
           << " words; they fill " << llvm::divideCeil(streamBits, 32);
  return success();
}

ParseResult HadamardOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand rows;
  IntegerAttr dim, seed;
  Type i64 = parser.getBuilder().getI64Type();
  if (parser.parseOperand(rows) || parser.parseKeyword("dim") ||
      parser.parseAttribute(dim, i64, "dim", result.attributes))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("seed")) &&
      parser.parseAttribute(seed, i64, "seed", result.attributes))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("inverse")))
    result.addAttribute("inverse", parser.getBuilder().getUnitAttr());
  Region *input = result.addRegion();
  if (succeeded(parser.parseOptionalKeyword("input"))) {
    SmallVector<OpAsmParser::Argument> args;
    if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren))
      return failure();
    for (OpAsmParser::Argument &arg : args)
      arg.type = parser.getBuilder().getIndexType();
    if (parser.parseRegion(*input, args))
      return failure();
  }
  Type type;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type) ||
      parser.resolveOperand(rows, type, result.operands))
    return failure();
  return success();
}

void HadamardOp::print(OpAsmPrinter &p) {
  p << " " << getRows() << " dim " << getDim();
  if (std::optional<uint64_t> seed = getSeed())
    p << " seed " << *seed;
  if (getInverse())
    p << " inverse";
  if (Block *block = getInputBlock()) {
    p << " input(";
    llvm::interleaveComma(block->getArguments(), p,
                          [&](BlockArgument arg) { p.printOperand(arg); });
    p << ") ";
    p.printRegion(getInput(), /*printEntryBlockArgs=*/false);
  }
  p.printOptionalAttrDict((*this)->getAttrs(), {"dim", "seed", "inverse"});
  p << " : " << getRows().getType();
}

LogicalResult HadamardOp::verify() {
  uint64_t dim = getDim();
  if (!llvm::isPowerOf2_64(dim))
    return emitOpError("rotates rows of ")
           << dim << " channels; the transform needs a power of two";
  MemRefType type = getRows().getType();
  if (!type.hasStaticShape() || type.getNumElements() % dim != 0)
    return emitOpError("needs a buffer of whole rows of ")
           << dim << " channels, not " << type;
  if (std::optional<uint64_t> seed = getSeed();
      seed && *seed > std::numeric_limits<uint32_t>::max())
    return emitOpError("seed ") << *seed << " is not a `rotate_seed` (32 bits)";
  Block *input = getInputBlock();
  if (!input)
    return success();
  if (input->getNumArguments() != 2 ||
      !llvm::all_of(input->getArgumentTypes(),
                    [](Type type) { return type.isIndex(); }))
    return emitOpError("input takes (row, channel) as two indices");
  if (input->empty() || !isa<YieldOp>(input->back()))
    return emitOpError("input must end with kvq.yield");
  return success();
}
