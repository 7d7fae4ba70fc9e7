//===- HostFeatures.cpp - x86 CPU features of the running machine --------===//
//
// Part of kvq.
//
//===----------------------------------------------------------------------===//

#include "kvq/Support/HostFeatures.h"

bool kvq::hostHasFeature(const std::string &Name, bool &Known) {
  Known = true;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#define KVQ_HOST_FEATURE_CHECK(Llvm, Check)                                    \
  if (Name == Llvm)                                                            \
    return __builtin_cpu_supports(Check);
  KVQ_X86_HOST_FEATURES(KVQ_HOST_FEATURE_CHECK)
#undef KVQ_HOST_FEATURE_CHECK
#endif
  Known = false;
  return false;
}
