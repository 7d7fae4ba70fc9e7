//===- ExpandMath.cpp - math ops as each target's arithmetic --------------===//
//
// A kernel program says 2^x as `math.exp2`, valid on every target; each
// target computes it its own way (KernelTarget::exp2), as its emitted
// kernels do. The rewrite runs after the forms passes, so that the host's
// exp2 is of vectors.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDMATH
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// `math.exp2` of f32 values as `target`'s 2^x.
struct Exp2AsTarget : OpRewritePattern<math::Exp2Op> {
  Exp2AsTarget(MLIRContext *ctx, KernelTarget &target)
      : OpRewritePattern<math::Exp2Op>(ctx), target(target) {}

  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    if (!getElementTypeOrSelf(op.getType()).isF32())
      return rewriter.notifyMatchFailure(op, "not of f32");
    KernelBuilder kb(rewriter, op.getLoc(), target);
    rewriter.replaceOp(op, target.exp2(kb, op.getOperand()));
    return success();
  }

  KernelTarget &target;
};

struct KVQExpandMathPass : kvq::impl::KVQExpandMathBase<KVQExpandMathPass> {
  void runOnOperation() override {
    auto expand = [&](Operation *module, CacheOp cache) {
      TargetAttr target = getCacheTarget(cache);
      std::unique_ptr<KernelTarget> kernelTarget =
          isa<ModuleOp>(module)
              ? createCPUTarget(cast<ModuleOp>(module), target)
              : createGPUTarget(cast<gpu::GPUModuleOp>(module), target);
      RewritePatternSet patterns(&getContext());
      patterns.add<Exp2AsTarget>(&getContext(), *kernelTarget);
      walkAndApplyPatterns(module, std::move(patterns));
      return success();
    };
    if (failed(forEachCacheModule(getOperation(), expand)))
      signalPassFailure();
  }
};

} // namespace
