//===- SetModel.cpp - instantiate a cache's schemes for another model -----===//
//
// A published scheme is stated for the model of its paper; kvq-set-model
// restates it for another shape. Layers map by relative depth, which keeps
// what per-layer schedules express ("the first half of the layers", "from
// the last quarter on") across layer counts.
//
//===----------------------------------------------------------------------===//

#include "kvq/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <numeric>

namespace kvq {
#define GEN_PASS_DEF_KVQSETMODEL
#include "kvq/Transforms/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// The old layer whose scheme new layer `layer` of `newLayers` takes: the
/// one at the same relative depth, floor((layer + 1/2) * old / new).
static unsigned getSourceLayer(unsigned layer, unsigned oldLayers,
                               unsigned newLayers) {
  return unsigned((2 * uint64_t(layer) + 1) * oldLayers / (2 * newLayers));
}

/// The first new layer whose source layer is at or past old layer `first`
/// (newLayers when there is none).
static unsigned mapLayerBound(unsigned first, unsigned oldLayers,
                              unsigned newLayers) {
  unsigned layer = 0;
  while (layer < newLayers &&
         getSourceLayer(layer, oldLayers, newLayers) < first)
    ++layer;
  return layer;
}

namespace {

struct KVQSetModelPass : kvq::impl::KVQSetModelBase<KVQSetModelPass> {
  using Base::Base;

  void runOnOperation() override {
    CacheOp cache = getOperation();
    ModelAttr oldModel = cache.getModel();
    FailureOr<ModelAttr> model = getNewModel(cache);
    if (failed(model))
      return signalPassFailure();
    for (Operation *tensor :
         {cache.getKeys().getOperation(), cache.getValues().getOperation()})
      if (failed(checkSchemesFit(tensor, oldModel, *model)))
        return signalPassFailure();
    remapTensor(cache.getKeys(), oldModel, *model);
    remapTensor(cache.getValues(), oldModel, *model);
    if (PoolAttr pool = cache.getPoolAttr())
      cache.setPoolAttr(PoolAttr::get(
          &getContext(), pool.getCapacity(), pool.getExtra(),
          mapLayerBound(pool.getFirstLayer(), oldModel.getLayers(),
                        model->getLayers())));
    cache.setModelAttr(*model);
  }

  /// The model with the options that are set, or an error at the cache.
  FailureOr<ModelAttr> getNewModel(CacheOp cache) {
    ModelAttr old = cache.getModel();
    auto pick = [](unsigned value, unsigned keep) {
      return value ? value : keep;
    };
    Type type = old.getDtype();
    if (!dtype.empty()) {
      Builder b(&getContext());
      type = llvm::StringSwitch<Type>(dtype)
                 .Case("f16", b.getF16Type())
                 .Case("bf16", b.getBF16Type())
                 .Case("f32", b.getF32Type())
                 .Default(Type());
      if (!type)
        return cache.emitError("kvq-set-model: dtype must be f16, bf16 or "
                               "f32, got '")
               << dtype << "'";
    }
    auto emitError = [&] { return cache.emitError("kvq-set-model: "); };
    ModelAttr model = ModelAttr::getChecked(
        emitError, &getContext(), pick(layers, old.getLayers()),
        pick(heads, old.getHeads()), pick(kvHeads, old.getKvHeads()),
        pick(headDim, old.getHeadDim()), type, FloatAttr(),
        old.getChannelOrder());
    if (!model)
      return failure();
    return model;
  }

  /// Rejects, at the op declaring it, a scheme of `tensor` that cannot be
  /// used with `model`, naming the fix.
  LogicalResult checkSchemesFit(Operation *tensor, ModelAttr old,
                                ModelAttr model) {
    for (Operation &op : tensor->getRegion(0).front()) {
      if (isa<LayerOp>(op))
        return op.emitOpError("kvq-set-model needs the schedule as written "
                              "(kvq.layers ranges): set the model before "
                              "kvq-expand-schedule");
      auto quant = dyn_cast<QuantAttr>(cast<LayersOp>(op).getScheme());
      if (quant && failed(checkQuantFits(&op, quant, old, model)))
        return failure();
    }
    return success();
  }

  LogicalResult checkQuantFits(Operation *op, QuantAttr quant, ModelAttr old,
                               ModelAttr model) {
    unsigned dim = model.getHeadDim(), group = quant.getGroup();
    // Tables are [layers][kv-heads][...]: they still describe the model when
    // those and head_dim stay (a change of query heads or dtype).
    bool sameTables = old.getLayers() == model.getLayers() &&
                      old.getKvHeads() == model.getKvHeads() &&
                      old.getHeadDim() == dim;
    if (!sameTables && (quant.getReorder() || quant.getClipTable()))
      return op->emitOpError("has tables calibrated for the old model "
                             "(channel reorder or per-group clipping): "
                             "recalibrate them for the new one instead of "
                             "setting the model");
    if (quant.getSpan() == Span::Channels && dim % group != 0 &&
        !(clampGroups && group > dim)) {
      InFlightDiagnostic diag = op->emitOpError("channel groups of ")
                                << group << " do not fit head_dim " << dim
                                << ": use a group that divides it (group = "
                                << std::gcd(dim, group) << ")";
      if (group > dim)
        diag << ", or clamp-groups=true for one group per head";
      return diag;
    }
    RopeAttr rope = quant.getPreRope();
    if (rope && rope.getDims() != old.getHeadDim() && rope.getDims() > dim)
      return op->emitOpError("pre_rope rotates ")
             << rope.getDims() << " dimensions, more than head_dim " << dim
             << ": state the new model's rotary dimensions";
    return success();
  }

  /// A scheme of the old model restated for `model`: full rotary
  /// embeddings (dims = old head_dim) follow the new head_dim, and with
  /// clamp-groups a channel group wider than the head becomes the head.
  Attribute restate(Attribute scheme, ModelAttr old, ModelAttr model) const {
    auto quant = dyn_cast<QuantAttr>(scheme);
    if (!quant)
      return scheme;
    unsigned dim = model.getHeadDim(), group = quant.getGroup();
    if (clampGroups && quant.getSpan() == Span::Channels && group > dim)
      group = dim;
    RopeAttr rope = quant.getPreRope();
    if (rope && rope.getDims() == old.getHeadDim())
      rope = RopeAttr::get(quant.getContext(), rope.getTheta(), dim,
                           rope.getStyle(), rope.getScaling());
    return QuantAttr::get(quant.getContext(), quant.getBits(), quant.getMode(),
                          quant.getSpan(), group, quant.getParams(),
                          quant.getLevels(), quant.getEta(), quant.getClip(),
                          quant.getReorder(), quant.getKeyNorm(), rope,
                          quant.getRotate(), quant.getRotateSeed());
  }

  /// Rewrites the schedule of `tensor` for `model.getLayers()` layers.
  template <typename TensorOpT>
  void remapTensor(TensorOpT tensor, ModelAttr old, ModelAttr model) const {
    SmallVector<LayerScheme> schemes = tensor.getLayerSchemes();
    unsigned oldLayers = old.getLayers(), newLayers = model.getLayers();
    Block &body = tensor.getBody().front();
    Location loc = body.front().getLoc();
    for (Operation &op : llvm::make_early_inc_range(body))
      op.erase();
    OpBuilder b = OpBuilder::atBlockEnd(&body);
    unsigned begin = 0;
    for (unsigned layer = 1; layer <= newLayers; ++layer) {
      Attribute scheme =
          schemes[getSourceLayer(begin, oldLayers, newLayers)].scheme;
      if (layer < newLayers &&
          schemes[getSourceLayer(layer, oldLayers, newLayers)].scheme == scheme)
        continue;
      LayersOp::create(b, loc, begin, layer, restate(scheme, old, model));
      begin = layer;
    }
    if (ShareAttr share = tensor.getShareAttr()) {
      unsigned from = mapLayerBound(share.getFrom(), oldLayers, newLayers);
      from = llvm::alignTo(from, share.getGroup());
      if (from >= newLayers)
        tensor.removeShareAttr();
      else
        tensor.setShareAttr(ShareAttr::get(tensor.getContext(), from,
                                           share.getGroup(), share.getOwner()));
    }
  }
};

} // namespace
