//===- ExpandSchedule.cpp - one explicit scheme per layer -----------------===//

#include "kvq/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDSCHEDULE
#include "kvq/Transforms/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// Rewrite the `kvq.layers` ranges of a kvq.keys or kvq.values into one
/// `kvq.layer` per layer, in order, with sharing stated per layer.
template <typename TensorOpT>
struct ExpandTensorSchedule : OpRewritePattern<TensorOpT> {
  using OpRewritePattern<TensorOpT>::OpRewritePattern;

  LogicalResult matchAndRewrite(TensorOpT op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBody().front();
    if (body.template getOps<LayersOp>().empty())
      return failure();
    SmallVector<LayerScheme> schemes = op.getLayerSchemes();
    rewriter.modifyOpInPlace(op, [&] { op.removeShareAttr(); });
    for (Operation &old : llvm::make_early_inc_range(body))
      rewriter.eraseOp(&old);
    rewriter.setInsertionPointToEnd(&body);
    for (auto [index, layer] : llvm::enumerate(schemes)) {
      IntegerAttr codesFrom;
      if (layer.codesFrom)
        codesFrom = rewriter.getI64IntegerAttr(*layer.codesFrom);
      LayerOp::create(rewriter, op.getLoc(), index, layer.scheme, codesFrom);
    }
    return success();
  }
};

struct KVQExpandSchedulePass
    : kvq::impl::KVQExpandScheduleBase<KVQExpandSchedulePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandTensorSchedule<KeysOp>, ExpandTensorSchedule<ValuesOp>>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
