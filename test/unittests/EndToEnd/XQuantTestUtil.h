//===- XQuantTestUtil.h - the XQuant test spec's cache and reference -*- C++
//-*-===//
//
// Shared by the tests of test/unittests/Runtime/Specs/xquant-d64-gqa4.mlir:
// its reference slice configuration, a cache on the CPU backend or the PTX
// interpreter, and reading a stored f16 parameter.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TEST_ENDTOEND_XQUANTTESTUTIL_H
#define KVQ_TEST_ENDTOEND_XQUANTTESTUTIL_H

#include "OneSequenceCache.h"
#include "kvq/Reference/Reference.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cstring>

namespace kvq::test {

constexpr unsigned kXQuantHeads = 8, kXQuantKvHeads = 2, kXQuantDim = 64;

/// The spec's schemes, written from its text: 2-bit keys (span = tokens,
/// eta 0.045, flush 128), 1-bit values (span = channels, eta 1/6).
inline ref::SliceConfig xquantSliceConfig() {
  auto scheme = [](int bits, ref::Span span, double eta) {
    ref::QuantScheme s;
    s.bits = bits;
    s.mode = ref::Mode::Asym;
    s.span = span;
    s.groupSize = 32;
    s.eta = eta;
    return s;
  };
  ref::SliceConfig c;
  c.headDim = kXQuantDim;
  c.key = {scheme(2, ref::Span::Tokens, 0.045), 0, 1, 128};
  c.value = {scheme(1, ref::Span::Channels, 1.0 / 6), 0, 129, 1};
  return c;
}

/// A one-sequence cache of the spec's artifact on the CPU backend or on the
/// PTX interpreter (sm_80).
inline std::unique_ptr<runtime::Cache> makeXQuantCache(bool interpreter) {
  return makeOneSequenceCache(KVQ_ARTIFACT_DIR_E2E_XQUANT_D64_GQA4,
                              interpreter);
}

/// The f16 parameter at byte `offset` of a slice page.
inline uint16_t readParam16(const std::vector<uint8_t> &page, uint64_t offset) {
  uint16_t bits;
  std::memcpy(&bits, &page[offset], 2);
  return bits;
}

} // namespace kvq::test

#endif // KVQ_TEST_ENDTOEND_XQUANTTESTUTIL_H
