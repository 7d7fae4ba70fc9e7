//===- Hadamard.h - the constants of a Hadamard rotation --------*- C++ -*-===//
//
// Part of kvq. Plain C++17, header-only: the compiler bakes these constants
// into the kernels and the reference computes with the same ones.
//
//===----------------------------------------------------------------------===//
//
// `rotate = hadamard` (docs/Numerics.md, "Hadamard rotation") rotates a
// token's n channels by R = H S / sqrt(n). The signs S come from
// `rotate_seed` through splitmix64; the scale is 1/sqrt(n) rounded once to
// fp32.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_SUPPORT_HADAMARD_H
#define KVQ_SUPPORT_HADAMARD_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace kvq::hadamard {

/// splitmix64 (Steele, Lea, Flood): the state advances by the golden-ratio
/// increment, and each output is the state mixed.
inline uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Whether each of \p n channels is negated under `rotate_seed = seed`:
/// channel c takes bit (c mod 64) of the (c / 64)-th output of splitmix64
/// started at the seed. (Without a seed no channel is.)
inline std::vector<bool> negatedChannels(uint64_t seed, unsigned n) {
  std::vector<bool> negated(n);
  uint64_t state = seed, bits = 0;
  for (unsigned c = 0; c < n; ++c) {
    if (c % 64 == 0)
      bits = splitmix64(state);
    negated[c] = (bits >> (c % 64)) & 1;
  }
  return negated;
}

/// The scale 1/sqrt(n) rounded once to fp32 (fp64 sqrt and division).
inline float scale(unsigned n) { return float(1.0 / std::sqrt(double(n))); }

} // namespace kvq::hadamard

#endif // KVQ_SUPPORT_HADAMARD_H
