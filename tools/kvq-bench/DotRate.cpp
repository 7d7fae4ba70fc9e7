//===- DotRate.cpp - the host's integer dot-product rate ------------------===//

#include "DotRate.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace kvq::bench;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

#if defined(__x86_64__)

/// Cycles a second: `iterations` x 16 multiplies, each waiting for the one
/// before, at the 3-cycle latency `imul r64, r64` has on every x86-64 core
/// since Sandy Bridge and Zen. A chain of `add $1` is not a clock: Golden
/// Cove's renamer folds immediate adds, and ran such a chain at 2.6-5.6 a
/// cycle. The loop's own compare and branch run beside the chain.
double measureHertz(uint64_t iterations) {
  constexpr double kMultiplyLatency = 3;
  uint64_t x = 1, one = 1;
  auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i)
    asm volatile(".rept 16\n\timul %1, %0\n\t.endr" : "+r"(x) : "r"(one));
  double seconds = secondsSince(start);
  return double(iterations) * 16 * kMultiplyLatency / seconds;
}

enum class DotKind { Pairs, Quads };

/// Runs `iterations` rounds of one dot on each of 16 independent
/// accumulators; returns the instructions a second.
template <DotKind kind>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double
measureDots(uint64_t iterations) {
  __m512i acc[16];
  for (__m512i &sum : acc)
    sum = _mm512_setzero_si512();
  __m512i a = _mm512_set1_epi16(3), b = _mm512_set1_epi16(5);
  auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    // The operands pass through an empty asm so that no round's products
    // are known to the compiler.
    asm volatile("" : "+v"(a), "+v"(b));
    for (__m512i &sum : acc)
      sum = kind == DotKind::Pairs ? _mm512_dpwssd_epi32(sum, a, b)
                                   : _mm512_dpbusd_epi32(sum, a, b);
  }
  double seconds = secondsSince(start);
  alignas(64) int32_t lanes[16 * 16];
  for (int k = 0; k < 16; ++k)
    _mm512_store_si512(lanes + 16 * k, acc[k]);
  int32_t total = 0;
  for (int32_t lane : lanes)
    total += lane;
  volatile int32_t sink = total;
  (void)sink;
  return double(iterations) * 16 / seconds;
}

#endif

} // namespace

std::optional<DotRate> kvq::bench::measureDotRate() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") ||
      !__builtin_cpu_supports("avx512bw"))
    return std::nullopt;
  // Each measure takes about 5 ms at 3 GHz; the best of several rounds,
  // interleaved, is the rate of a round no other process interrupted.
  constexpr uint64_t kIterations = uint64_t(1) << 20;
  constexpr unsigned kRounds = 8;
  double hertz = 0, pairs = 0, quads = 0;
  for (unsigned round = 0; round < kRounds; ++round) {
    hertz = std::max(hertz, measureHertz(kIterations / 4));
    pairs = std::max(pairs, measureDots<DotKind::Pairs>(kIterations / 4));
    quads = std::max(quads, measureDots<DotKind::Quads>(kIterations / 4));
  }
  return DotRate{hertz, pairs / hertz, quads / hertz};
#else
  return std::nullopt;
#endif
}
