//===- HostFeatures.h - x86 CPU features of host kernels --------*- C++ -*-===//
//
// Part of kvq. Plain C++17, shared by the code generator (which records the
// features host kernels were compiled for) and the runtime (which checks
// them before loading the kernels).
//
//===----------------------------------------------------------------------===//
//
// One table: each entry is an LLVM x86 target feature that kvq records in a
// manifest, and the name the running CPU is checked by (GCC/Clang
// __builtin_cpu_supports). Pseudo-features implied by another feature map to
// it (evex512 to avx512f, crc32 to sse4.2; 64bit, x87, cx8 and fxsr are
// x86-64's baseline, checked as sse2). LLVM's tuning features are not ISA
// and are not recorded. The runtime refuses a manifest naming a feature outside
// this table.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_SUPPORT_HOSTFEATURES_H
#define KVQ_SUPPORT_HOSTFEATURES_H

#include <string>

#define KVQ_X86_HOST_FEATURES(X)                                               \
  X("64bit", "sse2")                                                           \
  X("x87", "sse2")                                                             \
  X("cmov", "cmov")                                                            \
  X("cx8", "sse2")                                                             \
  X("cx16", "cmpxchg16b")                                                      \
  X("fxsr", "sse2")                                                            \
  X("mmx", "mmx")                                                              \
  X("sse", "sse")                                                              \
  X("sse2", "sse2")                                                            \
  X("sse3", "sse3")                                                            \
  X("ssse3", "ssse3")                                                          \
  X("sse4.1", "sse4.1")                                                        \
  X("sse4.2", "sse4.2")                                                        \
  X("crc32", "sse4.2")                                                         \
  X("sse4a", "sse4a")                                                          \
  X("popcnt", "popcnt")                                                        \
  X("sahf", "lahf_lm")                                                         \
  X("lzcnt", "lzcnt")                                                          \
  X("movbe", "movbe")                                                          \
  X("bmi", "bmi")                                                              \
  X("bmi2", "bmi2")                                                            \
  X("adx", "adx")                                                              \
  X("aes", "aes")                                                              \
  X("pclmul", "pclmul")                                                        \
  X("xsave", "xsave")                                                          \
  X("avx", "avx")                                                              \
  X("avx2", "avx2")                                                            \
  X("fma", "fma")                                                              \
  X("f16c", "f16c")                                                            \
  X("avxvnni", "avxvnni")                                                      \
  X("gfni", "gfni")                                                            \
  X("vaes", "vaes")                                                            \
  X("vpclmulqdq", "vpclmulqdq")                                                \
  X("avx512f", "avx512f")                                                      \
  X("evex512", "avx512f")                                                      \
  X("avx512cd", "avx512cd")                                                    \
  X("avx512bw", "avx512bw")                                                    \
  X("avx512dq", "avx512dq")                                                    \
  X("avx512vl", "avx512vl")                                                    \
  X("avx512ifma", "avx512ifma")                                                \
  X("avx512vbmi", "avx512vbmi")                                                \
  X("avx512vbmi2", "avx512vbmi2")                                              \
  X("avx512vnni", "avx512vnni")                                                \
  X("avx512bitalg", "avx512bitalg")                                            \
  X("avx512vpopcntdq", "avx512vpopcntdq")                                      \
  X("avx512bf16", "avx512bf16")                                                \
  X("avx512fp16", "avx512fp16")                                                \
  X("avx512vp2intersect", "avx512vp2intersect")

namespace kvq {

/// The LLVM names of the table, in order.
inline constexpr const char *kHostFeatureNames[] = {
#define KVQ_HOST_FEATURE_NAME(Llvm, Check) Llvm,
    KVQ_X86_HOST_FEATURES(KVQ_HOST_FEATURE_NAME)
#undef KVQ_HOST_FEATURE_NAME
};

/// Whether the running CPU has feature `Name` (an LLVM name of the table);
/// false, with `Known` false, for a name outside the table.
bool hostHasFeature(const std::string &Name, bool &Known);

} // namespace kvq

#endif // KVQ_SUPPORT_HOSTFEATURES_H
