//===- AttachNVVMTargets.cpp - PTX targets from each cache's kvq.target ---===//
//
// The chips PTX is emitted for are a fact of the cache's #kvq.target, like
// its block size; this pass turns them into the gpu.module targets that
// gpu-module-to-binary compiles for.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Layout.h"
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
      auto name = gpuModule->getAttrOfType<FlatSymbolRefAttr>("kvq.cache");
      if (!name)
        return WalkResult::advance();
      auto cache = SymbolTable::lookupNearestSymbolFrom<CacheOp>(module, name);
      if (!cache) {
        gpuModule.emitError("names no kvq.cache ") << name;
        return WalkResult::interrupt();
      }
      SmallVector<Attribute> targets;
      for (const std::string &chip : getCacheTarget(cache).getChipNames())
        targets.push_back(NVVM::NVVMTargetAttr::get(
            &getContext(), /*optLevel=*/3, "nvptx64-nvidia-cuda", chip));
      gpuModule.setTargetsAttr(ArrayAttr::get(&getContext(), targets));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
