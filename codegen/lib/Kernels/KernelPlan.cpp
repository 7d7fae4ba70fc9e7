//===- KernelPlan.cpp - which kernels a cache needs -----------------------===//

#include "kvq/Codegen/Kernels.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace kvq;

SmallVector<ArgKind> KernelSpec::getArgs() const {
  constexpr ArgKind P = ArgKind::Ptr, R = ArgKind::InPtr, I = ArgKind::I32;
  switch (kind) {
  case KernelKind::KeyNorm:
    return {R, P, I};
  case KernelKind::Flush:
    return {R, P, R, R, I, I};
  case KernelKind::Attend:
    return {R, P, R, R, R, R, R, R, R, R, R, R, I, I};
  case KernelKind::Combine:
    return {R, P, R, I};
  }
  llvm_unreachable("unknown kernel kind");
}

StringRef KernelSpec::getKindName() const {
  switch (kind) {
  case KernelKind::KeyNorm:
    return "keynorm";
  case KernelKind::Flush:
    return "flush";
  case KernelKind::Attend:
    return "attend";
  case KernelKind::Combine:
    return "combine";
  }
  llvm_unreachable("unknown kernel kind");
}

KernelPlan kvq::planKernels(const CacheLayout &layout) {
  KernelPlan plan;
  // Layers with the same schemes share kernels: keyed by scheme attributes
  // (uniqued, so pointer identity is equality).
  DenseMap<std::pair<Attribute, Attribute>, std::string> attendByPair;
  DenseMap<Attribute, std::string> flushByScheme[2];
  bool needsKeyNorm = false;
  auto add = [&](std::string name, KernelKind kind, unsigned layer,
                 bool isKeys) {
    plan.kernels.push_back({name, kind, layer, isKeys});
    return name;
  };
  for (unsigned l = 0; l < layout.model.getLayers(); ++l) {
    KernelPlan::LayerKernels kernels;
    for (bool isKeys : {true, false}) {
      Attribute scheme = layout.get(isKeys).layers[l].scheme;
      std::string &name = flushByScheme[isKeys ? 0 : 1][scheme];
      if (name.empty())
        name = add(std::string("kvq_flush_") + (isKeys ? "keys_" : "values_") +
                       std::to_string(flushByScheme[isKeys ? 0 : 1].size() - 1),
                   KernelKind::Flush, l, isKeys);
      kernels.flush[isKeys ? 0 : 1] = name;
    }
    auto pair = std::make_pair(layout.keys.layers[l].scheme,
                               layout.values.layers[l].scheme);
    std::string &attend = attendByPair[pair];
    if (attend.empty())
      attend = add("kvq_attend_" + std::to_string(attendByPair.size() - 1),
                   KernelKind::Attend, l, true);
    kernels.attend = attend;
    if (layout.hasKeyNorm(l)) {
      kernels.keyNorm = "kvq_keynorm";
      needsKeyNorm = true;
    }
    plan.layers.push_back(kernels);
  }
  if (needsKeyNorm)
    add("kvq_keynorm", KernelKind::KeyNorm, 0, true);
  plan.combine = add("kvq_combine", KernelKind::Combine, 0, true);
  return plan;
}

void kvq::emitKernel(const KernelSpec &spec, const CacheLayout &layout,
                     KernelTarget &target, OpBuilder &b, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  KernelEntry entry = target.createKernel(b, loc, spec.name, spec.getArgs());
  KernelBuilder kb(b, loc, target);
  switch (spec.kind) {
  case KernelKind::KeyNorm:
    emitKeyNormKernel(kb, entry, layout);
    break;
  case KernelKind::Flush:
    emitFlushKernel(kb, entry, layout, spec.layer, spec.isKeys);
    break;
  case KernelKind::Attend:
    emitAttendKernel(kb, entry, layout, spec.layer);
    break;
  case KernelKind::Combine:
    emitCombineKernel(kb, entry, layout);
    break;
  }
  target.finishKernel(b, loc);
}
