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

#include <cstring>

using namespace kvq::runtime;

namespace {

uint32_t bitsOf(float X) {
  uint32_t B;
  std::memcpy(&B, &X, 4);
  return B;
}

float fromBits(uint32_t B) {
  float X;
  std::memcpy(&X, &B, 4);
  return X;
}

/// fp32 -> IEEE binary16, RNE.
uint16_t toF16(float X) {
  uint32_t B = bitsOf(X);
  uint16_t Sign = uint16_t((B >> 16) & 0x8000);
  uint32_t Exp = (B >> 23) & 0xff;
  uint32_t Man = B & 0x7fffff;
  if (Exp == 0xff) // inf or NaN (quiet, top payload bits kept)
    return Sign | 0x7c00 | (Man ? uint16_t(0x200 | (Man >> 13)) : 0);
  int E = int(Exp) - 127 + 15;
  if (E >= 31)
    return Sign | 0x7c00;
  if (E <= 0) {
    // Subnormal (or zero) in f16: value = Man' * 2^-24.
    if (E < -10)
      return Sign;
    uint32_t Full = Man | 0x800000;
    unsigned Shift = unsigned(14 - E); // 13 + (1 - E)
    uint32_t Half = Full >> Shift;
    uint32_t Rem = Full & ((1u << Shift) - 1);
    uint32_t Mid = 1u << (Shift - 1);
    if (Rem > Mid || (Rem == Mid && (Half & 1)))
      ++Half;
    return Sign | uint16_t(Half);
  }
  uint32_t Half = (uint32_t(E) << 10) | (Man >> 13);
  uint32_t Rem = Man & 0x1fff;
  if (Rem > 0x1000 || (Rem == 0x1000 && (Half & 1)))
    ++Half; // may carry into the exponent, up to infinity: correct
  return Sign | uint16_t(Half);
}

float fromF16(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  uint32_t Exp = (H >> 10) & 0x1f;
  uint32_t Man = H & 0x3ff;
  if (Exp == 0x1f)
    return fromBits(Sign | 0x7f800000 | (Man << 13));
  if (Exp == 0) {
    float V = float(Man) * (1.0f / 16777216.0f); // Man * 2^-24, exact
    return Sign ? -V : V;
  }
  return fromBits(Sign | ((Exp + 112) << 23) | (Man << 13));
}

/// fp32 -> bf16, RNE.
uint16_t toBF16(float X) {
  uint32_t B = bitsOf(X);
  if ((B & 0x7f800000) == 0x7f800000 && (B & 0x7fffff))
    return uint16_t((B >> 16) | 0x40); // quiet NaN
  uint32_t Rounding = 0x7fff + ((B >> 16) & 1);
  return uint16_t((B + Rounding) >> 16);
}

} // namespace

void kvq::runtime::convertFromF32(DType Type, const float *In, size_t N,
                                  void *Out) {
  if (Type == DType::F32) {
    std::memcpy(Out, In, N * 4);
    return;
  }
  auto *O = static_cast<uint16_t *>(Out);
  for (size_t I = 0; I < N; ++I)
    O[I] = Type == DType::F16 ? toF16(In[I]) : toBF16(In[I]);
}

void kvq::runtime::convertToF32(DType Type, const void *In, size_t N,
                                float *Out) {
  if (Type == DType::F32) {
    std::memcpy(Out, In, N * 4);
    return;
  }
  const auto *H = static_cast<const uint16_t *>(In);
  for (size_t I = 0; I < N; ++I)
    Out[I] =
        Type == DType::F16 ? fromF16(H[I]) : fromBits(uint32_t(H[I]) << 16);
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
