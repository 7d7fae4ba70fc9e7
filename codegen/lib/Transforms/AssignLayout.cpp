//===- AssignLayout.cpp - the layout and target of every cache ------------===//
//
// The one place the page layout and the target are set; kernels and the
// manifest read the `kvq.layout` and `kvq.target` attributes left on each
// kvq.cache.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/IntegerFactors.h"
#include "kvq/Codegen/Layout.h"
#include "kvq/Codegen/Passes.h"

namespace kvq {
#define GEN_PASS_DEF_KVQASSIGNLAYOUT
#define GEN_PASS_DEF_KVQASSIGNTARGET
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQAssignLayoutPass
    : kvq::impl::KVQAssignLayoutBase<KVQAssignLayoutPass> {
  void runOnOperation() override {
    for (CacheOp cache : getOperation().getOps<CacheOp>()) {
      FailureOr<CacheLayout> layout = computeCacheLayout(cache);
      if (failed(layout))
        return signalPassFailure();
      cache->setAttr(LayoutAttr::getAttrName(),
                     getLayoutAttr(*layout, &getContext()));
    }
  }
};

struct KVQAssignTargetPass
    : kvq::impl::KVQAssignTargetBase<KVQAssignTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::string> names(chips.begin(), chips.end());
    FailureOr<HostTarget> host = resolveHostTarget(getOperation(), hostCpu);
    if (failed(host))
      return signalPassFailure();
    if (!IntegerDots::getForFactorBits(dotFactorBits)) {
      getOperation().emitError("kvq-assign-target: dot-factor-bits must be "
                               "16 or 8, not ")
          << unsigned(dotFactorBits);
      return signalPassFailure();
    }
    TargetAttr target = TargetAttr::getDefault(
        &getContext(), hostCpu, names, getVectorLanes(*host),
        getHostDotUnit(&getContext(), *host, dotFactorBits));
    for (CacheOp cache : getOperation().getOps<CacheOp>())
      if (!cache->hasAttr(TargetAttr::getAttrName()))
        cache->setAttr(TargetAttr::getAttrName(), target);
  }
};

} // namespace
