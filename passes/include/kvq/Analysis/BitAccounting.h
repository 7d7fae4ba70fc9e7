//===- BitAccounting.h - equivalent bits and exact bytes --------*- C++ -*-===//
//
// How many bits a cache spends per element, and how many bytes one sequence
// occupies. The definitions are in docs/BitAccounting.md; the code-bit and
// storage-bit figures reproduce the papers' tables (numerics.md section 6).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_ANALYSIS_BITACCOUNTING_H
#define KVQ_ANALYSIS_BITACCOUNTING_H

#include "kvq/Dialect/KVQ/KVQOps.h"

#include <cstdint>
#include <optional>

namespace kvq {

/// Asymptotic bits per cached element (T -> infinity: windows, pools and
/// per-sequence constants count 0), averaged over layers and keys/values.
struct EquivalentBits {
  /// Codes only; a layer that reuses another layer's codes counts 0.
  double codeBits = 0;
  /// Codes plus stored scales and zero-points.
  double storageBits = 0;
};

/// Exact bytes of one sequence of a given length.
struct SequenceBytes {
  uint64_t codes = 0;         ///< packed codes, in whole pages
  uint64_t params = 0;        ///< scales and zero-points, in whole pages
  uint64_t fullPrecision = 0; ///< sink and recent windows at capacity
  uint64_t pools = 0;         ///< outlier pools at capacity
  uint64_t metadata = 0;      ///< block tables, key norms

  uint64_t getTotal() const {
    return codes + params + fullPrecision + pools + metadata;
  }
};

/// Token counts of one tensor's regions after `tokens` tokens were appended.
struct TokenRegions {
  uint64_t sink = 0;
  uint64_t quantized = 0;
  uint64_t recent = 0;
};

/// Splits `tokens` into sink, quantized and recent tokens by the flush rule.
TokenRegions splitTokens(WindowAttr window, uint64_t tokens);

EquivalentBits computeEquivalentBits(CacheOp cache);

/// The bytes of one sequence of `tokens` tokens, or nullopt if a count
/// exceeds 64 bits.
std::optional<SequenceBytes> computeSequenceBytes(CacheOp cache,
                                                  uint64_t tokens);

/// As computeSequenceBytes, reporting an overflow as an error at the cache.
mlir::FailureOr<SequenceBytes> computeSequenceBytesOrError(CacheOp cache,
                                                           uint64_t tokens);

} // namespace kvq

#endif // KVQ_ANALYSIS_BITACCOUNTING_H
