//===- LowerKernels.cpp - kernel declarations to block programs -----------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQLOWERKERNELS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// Replace a kernel op by its block program, emitted through `target`.
template <typename KernelOpT>
struct LowerKernelOp : OpRewritePattern<KernelOpT> {
  LowerKernelOp(MLIRContext *ctx, KernelTarget &target)
      : OpRewritePattern<KernelOpT>(ctx), target(target) {}

  LogicalResult matchAndRewrite(KernelOpT op,
                                PatternRewriter &rewriter) const override {
    CacheOp cache = op.getCacheOp();
    if (!cache)
      return rewriter.notifyMatchFailure(op, "no cache");
    FailureOr<CacheLayout> layout = computeCacheLayout(cache);
    if (failed(layout))
      return failure();
    emitKernel(getKernelSpec(op), *layout, target, rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }

  KernelTarget &target;
};

struct KVQLowerKernelsPass
    : kvq::impl::KVQLowerKernelsBase<KVQLowerKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::unique_ptr<KernelTarget> kernelTarget;
    if (target == "cpu") {
      kernelTarget = createCPUTarget(module);
    } else if (target == "gpu") {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToEnd(module.getBody());
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
      auto gpuModule =
          gpu::GPUModuleOp::create(b, module.getLoc(), "kvq_kernels");
      kernelTarget = createGPUTarget(gpuModule);
    } else {
      module.emitError("kvq-lower-kernels: unknown target '")
          << target << "' (cpu or gpu)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerKernelOp<FlushKernelOp>, LowerKernelOp<KeyNormKernelOp>,
                 LowerKernelOp<AttendKernelOp>, LowerKernelOp<CombineKernelOp>>(
        &getContext(), *kernelTarget);
    // One in-order sweep: kernels are emitted in declaration order.
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace
