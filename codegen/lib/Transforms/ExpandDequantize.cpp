//===- ExpandDequantize.cpp - kvq.dequantize to arith ---------------------===//

#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDDEQUANTIZE
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// Expand a kvq.dequantize with the scheme's Quantizer builder.
struct ExpandDequantize : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rewriter) const override {
    KernelBuilder kb(rewriter, op.getLoc());
    Quantizer quantizer(kb, op.getScheme());
    rewriter.replaceOp(
        op, quantizer.dequantize(op.getCode(), op.getScale(), op.getZero()));
    return success();
  }
};

struct KVQExpandDequantizePass
    : kvq::impl::KVQExpandDequantizeBase<KVQExpandDequantizePass> {
  void runOnOperation() override {
    // One walk, each kvq.dequantize rewritten once (a greedy driver would
    // fold every kernel of the module again).
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandDequantize>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
