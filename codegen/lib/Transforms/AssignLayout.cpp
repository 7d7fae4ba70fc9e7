//===- AssignLayout.cpp - compute the layout of every cache ---------------===//
//
// The one place the page layout is computed; kernels and the manifest read
// the `kvq.layout` attribute it leaves on each kvq.cache.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Layout.h"
#include "kvq/Codegen/Passes.h"

namespace kvq {
#define GEN_PASS_DEF_KVQASSIGNLAYOUT
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

} // namespace
