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

size_t kvq::runtime::findNonFinite(DType Type, const void *In, size_t N) {
  if (Type == DType::F32) {
    const auto *W = static_cast<const uint8_t *>(In);
    for (size_t I = 0; I < N; ++I) {
      uint32_t B;
      std::memcpy(&B, W + 4 * I, 4);
      if ((B & 0x7f800000) == 0x7f800000)
        return I;
    }
    return N;
  }
  uint16_t Mask = Type == DType::F16 ? 0x7c00 : 0x7f80;
  const auto *W = static_cast<const uint8_t *>(In);
  for (size_t I = 0; I < N; ++I) {
    uint16_t H;
    std::memcpy(&H, W + 2 * I, 2);
    if ((H & Mask) == Mask)
      return I;
  }
  return N;
}
