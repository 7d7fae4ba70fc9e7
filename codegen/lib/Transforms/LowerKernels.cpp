//===- LowerKernels.cpp - kernel declarations to block programs -----------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

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
  LowerKernelOp(MLIRContext *ctx, KernelTarget &target,
                const llvm::DenseMap<Operation *, CacheLayout> &layouts)
      : OpRewritePattern<KernelOpT>(ctx), target(target), layouts(layouts) {}

  LogicalResult matchAndRewrite(KernelOpT op,
                                PatternRewriter &rewriter) const override {
    auto layout = layouts.find(op.getCacheOp());
    if (layout == layouts.end())
      return rewriter.notifyMatchFailure(op, "no layout for its cache");
    emitKernel(getKernelSpec(op), layout->second, target, rewriter,
               op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }

  KernelTarget &target;
  const llvm::DenseMap<Operation *, CacheLayout> &layouts;
};

/// The cache a kernel op serves; null for any other op.
CacheOp getKernelCache(Operation *op) {
  return llvm::TypeSwitch<Operation *, CacheOp>(op)
      .Case<FlushKernelOp, KeyNormKernelOp, AttendKernelOp, CombineKernelOp>(
          [](auto kernel) { return kernel.getCacheOp(); })
      .Default([](Operation *) { return CacheOp(); });
}

bool isKernelOp(Operation *op) {
  return isa<FlushKernelOp, KeyNormKernelOp, AttendKernelOp, CombineKernelOp>(
      op);
}

/// The layout of every cache a kernel op names, or failure (with a
/// diagnostic) if one cannot be computed: a kernel op is never left behind
/// silently.
FailureOr<llvm::DenseMap<Operation *, CacheLayout>>
computeKernelLayouts(ModuleOp module) {
  llvm::DenseMap<Operation *, CacheLayout> layouts;
  WalkResult result = module.walk([&](Operation *op) {
    if (!isKernelOp(op))
      return WalkResult::advance();
    CacheOp cache = getKernelCache(op);
    if (!cache) {
      op->emitError("kernel names no kvq.cache");
      return WalkResult::interrupt();
    }
    if (layouts.count(cache))
      return WalkResult::advance();
    FailureOr<CacheLayout> layout = computeCacheLayout(cache);
    if (failed(layout))
      return WalkResult::interrupt();
    layouts.try_emplace(cache, std::move(*layout));
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  return layouts;
}

struct KVQLowerKernelsPass
    : kvq::impl::KVQLowerKernelsBase<KVQLowerKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<llvm::DenseMap<Operation *, CacheLayout>> layouts =
        computeKernelLayouts(module);
    if (failed(layouts))
      return signalPassFailure();
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
        &getContext(), *kernelTarget, *layouts);
    // One in-order sweep: kernels are emitted in declaration order.
    walkAndApplyPatterns(module, std::move(patterns));
    WalkResult left = module.walk([](Operation *op) {
      if (!isKernelOp(op))
        return WalkResult::advance();
      op->emitError("kvq-lower-kernels could not lower this kernel");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
