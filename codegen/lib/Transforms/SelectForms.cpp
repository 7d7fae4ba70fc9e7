//===- SelectForms.cpp - pick the forms of every attend kernel ------------===//

#include "kvq/Codegen/Forms.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

namespace kvq {
#define GEN_PASS_DEF_KVQSELECTFORMS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQSelectFormsPass : kvq::impl::KVQSelectFormsBase<KVQSelectFormsPass> {
  void runOnOperation() override {
    llvm::DenseMap<Operation *, CacheLayout> layouts;
    WalkResult result = getOperation().walk([&](AttendKernelOp op) {
      CacheOp cache = op.getCacheOp();
      if (!cache) {
        op.emitError("kernel names no kvq.cache");
        return WalkResult::interrupt();
      }
      auto known = layouts.find(cache);
      if (known == layouts.end()) {
        FailureOr<CacheLayout> layout = getCacheLayout(cache);
        if (failed(layout))
          return WalkResult::interrupt();
        known = layouts.try_emplace(cache, std::move(*layout)).first;
      }
      // The op's layers share their schemes: its first stands for all.
      unsigned layer = op.getLayers().front();
      TargetAttr target = getCacheTarget(cache);
      MLIRContext *ctx = &getContext();
      op.setCpuFormsAttr(selectAttendForms(known->second, layer,
                                           getCPUTargetInfo(target), ctx));
      op.setGpuFormsAttr(selectAttendForms(known->second, layer,
                                           getGPUTargetInfo(target), ctx));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
