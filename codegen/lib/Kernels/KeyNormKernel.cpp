//===- KeyNormKernel.cpp - InnerQ per-channel key norms -------------------===//
//
// Block h computes, for every channel c of kv-head h, n_c = sqrt(max_t
// |K_t,c|) over the prompt, or 1 where that max is 0 (docs/Numerics.md).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace kvq;

/// n = sqrt(max |K|), or 1 where the max is 0 (scalars or vectors).
static Value normOf(KernelBuilder &kb, Value maxAbs) {
  return kb.select(kb.feq(maxAbs, kb.f32Like(maxAbs, 0)), kb.f32Like(maxAbs, 1),
                   kb.sqrt(maxAbs));
}

/// How far ahead of its row the CPU's vector form prefetches.
constexpr unsigned kKeyNormPrefetchTokens = 16;

/// The CPU's vector form: channels are lanes, the tokens one pass over the
/// prompt with every chunk of the head's row loaded contiguously (max and
/// sqrt are exact, so the norms are those of the scalar form).
static void emitKeyNormLanes(KernelBuilder &kb, Value src, Value norms,
                             Value count, Value head, ModelAttr model,
                             unsigned lanes) {
  unsigned dim = model.getHeadDim(), chunks = dim / lanes;
  Type dtype = model.getDtype();
  unsigned dtypeBytes = dtype.getIntOrFloatBitWidth() / 8;
  SmallVector<Value> init(chunks, kb.splat(kb.f32(0), lanes));
  SmallVector<Value> maxAbs = kb.forLoop(
      kb.i32(0), count, kb.i32(1), init,
      [&](Value t, ValueRange acc) -> SmallVector<Value> {
        Value row = fullPrecisionRow(kb, model, 0, kb.i32(0), t, head);
        // The head's rows are a fraction of every token's: prefetchers that
        // stop at 4 KiB pages see a stream only from here.
        Value ahead = kb.minU(kb.add(t, kb.i32(kKeyNormPrefetchTokens)),
                              kb.sub(count, kb.i32(1)));
        Value aheadRow = fullPrecisionRow(kb, model, 0, kb.i32(0), ahead, head);
        kb.getTarget().prefetch(kb, src,
                                kb.mul(kb.toI64(aheadRow), kb.i64(dtypeBytes)),
                                (dim * dtypeBytes + 63) / 64);
        SmallVector<Value> next;
        for (unsigned j = 0; j < chunks; ++j) {
          Value x = kb.loadFloatVector(dtype, src,
                                       kb.add(row, kb.i32(j * lanes)), lanes,
                                       /*invariant=*/true);
          next.push_back(kb.selectMax(kb.fabs(x), acc[j]));
        }
        return next;
      });
  for (unsigned j = 0; j < chunks; ++j) {
    Value index = kb.add(kb.mul(head, kb.i32(dim)), kb.i32(j * lanes));
    kb.store(normOf(kb, maxAbs[j]), norms, kb.mul(kb.toI64(index), kb.i64(4)),
             4);
  }
}

void kvq::emitKeyNormKernel(KernelBuilder &kb, const KernelEntry &entry,
                            const CacheLayout &layout) {
  using A = abi::KeyNormArgs;
  Value src = entry.args[A::Src], norms = entry.args[A::Norms],
        count = entry.args[A::NumTokens];
  Value head = entry.blockId[0];
  ModelAttr model = layout.model;
  unsigned dim = model.getHeadDim();
  if (unsigned lanes = getAppendLanes(kb.getTarget(), dim); lanes > 1)
    return emitKeyNormLanes(kb, src, norms, count, head, model, lanes);
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
    kb.storeF32(normOf(kb, maxAbs), norms,
                kb.add(kb.mul(head, kb.i32(dim)), c));
  });
}
