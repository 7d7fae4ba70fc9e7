//===- DotRate.h - the host's integer dot-product rate ----------*- C++ -*-===//
//
// The CPU's quantized attention loops are bound by AVX-512 VNNI's dot
// products (docs/Performance.md, "What bounds the CPU kernels"); their rate
// is the host's own yardstick for them, measured here rather than taken
// from a vendor table: a guest's vCPU may be a split 512-bit unit or a full
// one.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TOOLS_KVQ_BENCH_DOTRATE_H
#define KVQ_TOOLS_KVQ_BENCH_DOTRATE_H

#include <optional>

namespace kvq::bench {

struct DotRate {
  /// The core's clock, from a chain of dependent integer adds (one a cycle
  /// on every x86 core).
  double hertz = 0;
  /// 512-bit instructions a cycle on one core, with enough independent
  /// accumulators to cover their latency: vpdpwssd (i16 pairs into i32),
  /// vpdpbusd (u8 x s8 quads into i32).
  double pairDotsPerCycle = 0, quadDotsPerCycle = 0;
};

/// The host's rates, or nullopt without AVX-512 VNNI (and BW).
std::optional<DotRate> measureDotRate();

} // namespace kvq::bench

#endif // KVQ_TOOLS_KVQ_BENCH_DOTRATE_H
