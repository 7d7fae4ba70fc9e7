//===- CompileArtifact.cpp - the kvq-compile-artifact pass ----------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/Passes.h"

#include "llvm/Support/Path.h"

namespace kvq {
#define GEN_PASS_DEF_KVQCOMPILEARTIFACT
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQCompileArtifactPass
    : kvq::impl::KVQCompileArtifactBase<KVQCompileArtifactPass> {
  using Base::Base;

  void runOnOperation() override {
    auto caches = llvm::to_vector(getOperation().getOps<CacheOp>());
    if (dir.empty()) {
      getOperation().emitError("kvq-compile-artifact needs a 'dir'");
      return signalPassFailure();
    }
    for (CacheOp cache : caches) {
      SmallString<256> path(dir);
      if (caches.size() > 1)
        llvm::sys::path::append(path, cache.getSymName());
      if (failed(compileArtifact(cache, path, hostCpu)))
        return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
