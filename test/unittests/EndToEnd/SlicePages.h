//===- SlicePages.h - Codes and parameters read from page bytes -*- C++ -*-===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// Where a quantized token's code and its group's parameters lie in a slice
// page (docs/KernelABI.md), decoded with the manifest's layout: the tests
// compare them with the numerics reference bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TEST_ENDTOEND_SLICEPAGES_H
#define KVQ_TEST_ENDTOEND_SLICEPAGES_H

#include "kvq/Reference/Reference.h"
#include "kvq/Runtime/Artifact.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kvq::test {

/// The `Width` bits from bit `Bit` of `Bytes`, least significant first.
inline uint32_t extractBits(const uint8_t *Bytes, uint64_t Bit,
                            unsigned Width) {
  uint64_t V = 0;
  for (unsigned I = 0; I < Width; ++I, ++Bit)
    V |= uint64_t((Bytes[Bit / 8] >> (Bit % 8)) & 1) << I;
  return uint32_t(V);
}

/// A stored parameter's raw bits (`Size` bytes at `Offset`).
inline uint32_t readParam(const uint8_t *Bytes, uint64_t Offset,
                          unsigned Size) {
  uint32_t V = 0;
  std::memcpy(&V, Bytes + Offset, Size);
  return V;
}

/// Where token `Pi` of a page keeps the code of channel `Ch` (kv-head `H`,
/// head_dim `D`): the index of its group among the page's, whose scale and
/// zero-point are entries of ScalesOffset and ZerosOffset, and the code's
/// first bit.
struct CodePlace {
  unsigned Group;
  uint64_t Bit;
};

inline CodePlace codePlace(const runtime::LayerLayout &Layer, unsigned D,
                           unsigned H, unsigned Pi, unsigned Ch) {
  const runtime::SchemeLayout &Layout = Layer.Scheme;
  const abi::SliceLayout &Slice = Layer.Slice;
  unsigned G = Layout.Group, B = Layout.Bits;
  if (!Layout.Perm.empty()) {
    // Reordered (KernelABI.md, "Channel reorder"): the channel's position,
    // its group, and the group's first word in the token.
    const std::vector<unsigned> &Perm = Layout.Perm[H];
    unsigned Pos =
        unsigned(std::find(Perm.begin(), Perm.end(), Ch) - Perm.begin());
    unsigned Grp = 0, Start = 0;
    while (Start + Layout.GroupSizes[H][Grp] <= Pos)
      Start += Layout.GroupSizes[H][Grp++];
    return {Pi * (D / G) + Grp,
            (uint64_t(Pi) * Slice.WordsPerToken +
             uint64_t(Slice.GroupWords[H * Slice.GroupsPerToken + Grp])) *
                    32 +
                (Pos - Start) * B};
  }
  if (Layout.SpanTokens) {
    unsigned N = (Pi / G) * D + Ch;
    return {N, uint64_t(N) * Slice.WordsPerGroup * 32 + (Pi % G) * B};
  }
  unsigned N = Pi * (D / G) + Ch / G;
  return {N, uint64_t(N) * Slice.WordsPerGroup * 32 + (Ch % G) * B};
}

/// Which of the code, scale and zero-point that `Page` holds for channel
/// `Ch` of quantized token `I` (token `Pi` of the page) differ from the
/// reference's `Side`.
struct SlotMismatch {
  bool Code, Scale, Zero;
};

inline SlotMismatch compareSlot(const uint8_t *Page,
                                const runtime::LayerLayout &Layer,
                                const ref::CacheSide &Side, unsigned D,
                                unsigned H, int I, unsigned Pi, unsigned Ch) {
  auto [N, Bit] = codePlace(Layer, D, H, Pi, Ch);
  int Group = Side.groupOf(I, int(Ch));
  const abi::SliceLayout &Layout = Layer.Slice;
  unsigned PB = Layout.ParamBytes;
  auto Differs = [&](int64_t Offset, float Want) {
    return Offset >= 0 && readParam(Page, Offset + N * PB, PB) !=
                              ref::toParamBits(Want, Side.scheme().params);
  };
  return {extractBits(Page, Bit, Layer.Scheme.Bits) !=
              Side.codes()[size_t(I) * D + Ch],
          Differs(int64_t(Layout.ScalesOffset), Side.scales()[Group]),
          Differs(Layout.ZerosOffset, Side.zeros()[Group])};
}

} // namespace kvq::test

#endif // KVQ_TEST_ENDTOEND_SLICEPAGES_H
