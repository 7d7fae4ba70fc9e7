//===- ExpandGroupDots.cpp - kvq.group_dot by its target's forms ----------===//
//
// Each dot summed on its own is every target's form, and the GPU's: a
// thread's sum of a group's products is a chain of fused multiply-adds in
// its registers, and the folded parameters cost a multiply-add a head.
// Targets whose vectors are registers of lanes (a sum across them is a tree
// of permutes) take the pair dots' form (GroupDotPairs.cpp), the lanes' form
// (GroupDotLanes.cpp) and the carried form (GroupDotCarried.cpp) first.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"

#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Codegen/Targets.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDGROUPDOTS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct SumEachGroupDot : OpRewritePattern<GroupDotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupDotOp op,
                                PatternRewriter &rewriter) const override {
    ProgramBuilder pb(rewriter, op.getLoc());
    // The op's sums are in any order, with fused multiply-adds.
    pb.setReassociate(true);
    Value codes = pb.uitofp(op.getCodes());
    SmallVector<Value> dots;
    for (Value tile : op.getTiles())
      dots.push_back(pb.dot(tile, codes));
    AffineTerms terms{op.getSlope(), op.getOffset()};
    for (auto [dot, sum] : llvm::zip(dots, op.getSums()))
      dot = foldAffineDot(pb, terms, dot, sum);
    rewriter.replaceOp(op, dots);
    return success();
  }
};

/// One walk of `root` a family, each op rewritten once (no folding of the
/// rest, which a greedy driver would revisit in every kernel): where
/// `info`'s vectors are registers of lanes (a sum across them is a tree of
/// permutes), a row's dots on the target's pair dots, then the dots summed
/// in the lanes of a loop around, then the carried form's loops.
LogicalResult expandGroupDots(Operation *root, const TargetInfo &info) {
  MLIRContext *ctx = root->getContext();
  if (info.lanePermutes) {
    RewritePatternSet pairs(ctx);
    populatePairGroupDotPatterns(pairs, info);
    walkAndApplyPatterns(root, std::move(pairs));
    RewritePatternSet lanes(ctx);
    populateLaneGroupDotPatterns(lanes, info);
    walkAndApplyPatterns(root, std::move(lanes));
    RewritePatternSet carried(ctx);
    populateCarriedGroupDotPatterns(carried, info);
    walkAndApplyPatterns(root, std::move(carried));
  }
  if (info.matrix) {
    RewritePatternSet matrix(ctx);
    populateMatrixGroupDotPatterns(matrix, info);
    walkAndApplyPatterns(root, std::move(matrix));
  }
  RewritePatternSet patterns(ctx);
  patterns.add<SumEachGroupDot>(ctx);
  walkAndApplyPatterns(root, std::move(patterns));
  return success();
}

struct KVQExpandGroupDotsPass
    : kvq::impl::KVQExpandGroupDotsBase<KVQExpandGroupDotsPass> {
  void runOnOperation() override {
    // The kernel modules by their targets, then what is left anywhere.
    if (failed(forEachKernelModule(getOperation(), expandGroupDots)) ||
        failed(expandGroupDots(getOperation(), TargetInfo())))
      signalPassFailure();
  }
};

} // namespace
