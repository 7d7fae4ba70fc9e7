//===- PlanKernels.cpp - declare the kernels of every cache ---------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"

namespace kvq {
#define GEN_PASS_DEF_KVQPLANKERNELS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQPlanKernelsPass : kvq::impl::KVQPlanKernelsBase<KVQPlanKernelsPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    for (CacheOp cache : llvm::to_vector(getOperation().getOps<CacheOp>())) {
      FailureOr<CacheLayout> layout = getCacheLayout(cache);
      if (failed(layout))
        return signalPassFailure();
      planKernels(cache, *layout, b);
    }
  }
};

} // namespace
