//===- AttachNVVMTargets.cpp - PTX targets from each cache's kvq.target ---===//
//
// The chip PTX is emitted for is a fact of the cache's #kvq.target, like its
// block size; this pass turns it into the gpu.module target that
// kvq-gpu-module-to-binary compiles for. One PTX serves every chip of the
// target (TargetAttr::getPtxChip): the kernels are one program for all of
// them, so a PTX per chip would differ in its header only and double the
// time of the slowest stage.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace kvq {
#define GEN_PASS_DEF_KVQATTACHNVVMTARGETS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQAttachNVVMTargetsPass
    : kvq::impl::KVQAttachNVVMTargetsBase<KVQAttachNVVMTargetsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    WalkResult result = module.walk([&](gpu::GPUModuleOp gpuModule) {
      FailureOr<CacheOp> cache = getKernelModuleCache(module, gpuModule);
      if (failed(cache))
        return WalkResult::interrupt();
      if (!*cache)
        return WalkResult::advance();
      Attribute target = NVVM::NVVMTargetAttr::get(
          &getContext(), /*optLevel=*/3, "nvptx64-nvidia-cuda",
          getCacheTarget(*cache).getPtxChip());
      gpuModule.setTargetsAttr(ArrayAttr::get(&getContext(), {target}));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
