//===- InputLimits.h - bounds on a spec's text before parsing ---*- C++ -*-===//
//
// MLIR's parser recurses once per nested region, attribute or type, and
// materializes whatever a literal declares. A spec is a few kilobytes of
// declarations; these bounds, checked on the raw text before parsing, keep a
// hostile or corrupted file from exhausting the stack, memory or time
// (docs/Rationale.md, "Input limits").
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_DIALECT_KVQ_INPUTLIMITS_H
#define KVQ_DIALECT_KVQ_INPUTLIMITS_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>
#include <string>

namespace kvq {

/// Largest spec file accepted, in bytes. The largest shipped spec is a few
/// kilobytes; calibration tables as `dense_resource` blobs for a 4096-layer
/// model stay far below it.
constexpr size_t kMaxSpecBytes = size_t(16) << 20;

/// Deepest nesting of brackets ({, (, [, <) accepted. kvq's own specs nest
/// 6 deep; MLIR's recursive-descent parser overflows an 8 MiB stack near a
/// few thousand.
constexpr unsigned kMaxSpecNesting = 256;

/// Longest numeric literal accepted, in characters. A literal of f64 needs
/// at most 24 and a hexadecimal bit pattern 34; LLVM 22's decimal float
/// parser overflows a stack buffer on a literal of 50,000 digits, and its
/// integer parser takes quadratic time (27 s for 30,000 digits).
constexpr size_t kMaxNumericLiteralChars = 256;

/// Most `kvq.cache` ops a spec may declare. Compiling takes about half a
/// second per cache; the shipped specs declare one each.
constexpr unsigned kMaxSpecCaches = 64;

/// Where and why a spec's text exceeds a bound.
struct InputLimitViolation {
  size_t offset; ///< Byte offset of the offending character.
  std::string message;
};

/// Checks `text` against kMaxSpecBytes, kMaxSpecNesting,
/// kMaxNumericLiteralChars and kMaxSpecCaches, skipping comments (and string
/// literals, except that a generic op's quoted name "kvq.cache" counts).
/// Returns the first violation, if any.
std::optional<InputLimitViolation> checkSpecInputLimits(llvm::StringRef text);

} // namespace kvq

#endif // KVQ_DIALECT_KVQ_INPUTLIMITS_H
