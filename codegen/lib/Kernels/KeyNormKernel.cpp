//===- KeyNormKernel.cpp - InnerQ per-channel key norms -------------------===//
//
// Block h computes, for every channel c of kv-head h, n_c = sqrt(max_t
// |K_t,c|) over the prompt, or 1 where that max is 0 (docs/Numerics.md).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

using namespace mlir;
using namespace kvq;

void kvq::emitKeyNormKernel(KernelBuilder &kb, const KernelEntry &entry,
                            const CacheLayout &layout) {
  using A = abi::KeyNormArgs;
  Value src = entry.args[A::Src], norms = entry.args[A::Norms],
        count = entry.args[A::NumTokens];
  Value head = entry.blockId[0];
  ModelAttr model = layout.model;
  unsigned dim = model.getHeadDim();
  kb.getTarget().parallelFor(kb, kb.i32(dim), [&](Value c) {
    Value maxAbs =
        kb.forLoop(kb.i32(0), count, kb.i32(1), {kb.f32(0)},
                   [&](Value t, ValueRange acc) -> SmallVector<Value> {
                     Value index = kb.add(
                         fullPrecisionRow(kb, model, 0, kb.i32(0), t, head), c);
                     Value x = kb.loadFloat(model.getDtype(), src, index,
                                            /*invariant=*/true);
                     return {kb.fmax(acc[0], kb.fabs(x))};
                   })[0];
    Value norm =
        kb.select(kb.feq(maxAbs, kb.f32(0)), kb.f32(1), kb.sqrt(maxAbs));
    kb.storeF32(norm, norms, kb.add(kb.mul(head, kb.i32(dim)), c));
  });
}
