//===- DTypes.cpp - Model dtype conversions and checks --------------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The API passes queries, keys and values as raw model-dtype bits; these
// helpers convert fp32 convenience inputs (round to nearest, ties to even,
// subnormals exact, overflow to infinity) and find non-finite values, which
// the cache rejects before touching any buffer.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include "kvq/Support/Float.h"

#include <algorithm>
#include <cstring>

using namespace kvq;
using namespace kvq::runtime;

void kvq::runtime::convertFromF32(DType Type, const float *In, size_t N,
                                  void *Out) {
  if (Type == DType::F32) {
    std::memcpy(Out, In, N * 4);
    return;
  }
  auto *O = static_cast<uint16_t *>(Out);
  for (size_t I = 0; I < N; ++I)
    O[I] = Type == DType::F16 ? fp::floatToHalf(In[I]) : fp::floatToBF16(In[I]);
}

void kvq::runtime::convertToF32(DType Type, const void *In, size_t N,
                                float *Out) {
  if (Type == DType::F32) {
    std::memcpy(Out, In, N * 4);
    return;
  }
  const auto *H = static_cast<const uint16_t *>(In);
  for (size_t I = 0; I < N; ++I)
    Out[I] = Type == DType::F16 ? fp::halfToFloat(H[I]) : fp::bf16ToFloat(H[I]);
}

/// The index of the first element of `W[0 : N)` whose `Mask` bits (one run
/// of bits below the top bit: an exponent) are all set, or N. (B & Mask)
/// plus the mask's lowest bit carries into the bit above the mask exactly
/// when every bit of the mask is set, so a block is tested by an AND, an ADD
/// and an OR per element in the element's own width (vectorized without
/// widening), and searched only when one holds such an element.
template <typename Bits>
static size_t findAllOnes(const uint8_t *W, size_t N, Bits Mask) {
  constexpr size_t Block = 256;
  const Bits Lowest = Mask & Bits(~Mask + 1);
  const Bits Above = Bits(Mask + Lowest);
  auto Element = [&](size_t I) {
    Bits B;
    std::memcpy(&B, W + sizeof(Bits) * I, sizeof(Bits));
    return B;
  };
  for (size_t First = 0; First < N; First += Block) {
    size_t End = std::min(N, First + Block);
    Bits Carries = 0;
    for (size_t I = First; I < End; ++I)
      Carries |= Bits((Element(I) & Mask) + Lowest);
    if (!(Carries & Above))
      continue;
    for (size_t I = First; I < End; ++I)
      if ((Element(I) & Mask) == Mask)
        return I;
  }
  return N;
}

size_t kvq::runtime::findNonFinite(DType Type, const void *In, size_t N) {
  const auto *W = static_cast<const uint8_t *>(In);
  if (Type == DType::F32)
    return findAllOnes<uint32_t>(W, N, 0x7f800000);
  return findAllOnes<uint16_t>(W, N, Type == DType::F16 ? 0x7c00 : 0x7f80);
}
