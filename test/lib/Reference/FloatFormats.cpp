//===- FloatFormats.cpp - Parameter dtypes of the reference -----*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// One generic encoder handles the three narrow formats: it writes the fp32
// input as an integer significand times a power of two, shifts it to the
// target's quantum with round-to-nearest-even, and then encodes the result,
// deciding overflow per format.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/FloatFormats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvq::ref {

namespace {

/// A binary floating-point format narrower than fp32.
struct Format {
  int expBits;
  int manBits;
  int bias;
  /// IEEE style: the all-ones exponent encodes inf and NaN. E4M3FN instead
  /// uses it for numbers and keeps only mantissa all-ones for NaN.
  bool hasInf;
};

constexpr Format kF16{5, 10, 15, true};
constexpr Format kBF16{8, 7, 127, true};
constexpr Format kE4M3{4, 3, 7, false};

constexpr uint32_t kF32ManMask = 0x7FFFFF;

/// Shifts \p sig right by \p shift bits, rounding to nearest, ties to even.
uint64_t shiftRightRNE(uint64_t sig, int shift) {
  if (shift <= 0)
    return sig << -shift;
  // sig < 2^24, so for shifts this large it is below half of one unit.
  if (shift >= 40)
    return 0;
  uint64_t kept = sig >> shift;
  uint64_t rest = sig & ((uint64_t(1) << shift) - 1);
  uint64_t half = uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  return kept;
}

/// Position of the highest set bit of a nonzero value.
int highestBit(uint64_t v) {
  int bit = 0;
  while (v >>= 1)
    ++bit;
  return bit;
}

/// Encoding of +-inf (IEEE formats) or of the saturated +-max (E4M3FN).
uint32_t overflowBits(const Format &f, uint32_t signBit) {
  uint32_t maxExp = (1u << f.expBits) - 1;
  if (f.hasInf)
    return signBit | (maxExp << f.manBits);
  // E4M3FN: S.1111.110 = 448.
  return signBit | (maxExp << f.manBits) | ((1u << f.manBits) - 2);
}

uint32_t nanBits(const Format &f, uint32_t signBit, uint32_t f32Man) {
  uint32_t maxExp = (1u << f.expBits) - 1;
  uint32_t manMask = (1u << f.manBits) - 1;
  if (!f.hasInf)
    return signBit | (maxExp << f.manBits) | manMask;
  uint32_t payload = f32Man >> (23 - f.manBits);
  if (payload == 0)
    payload = 1u << (f.manBits - 1);
  return signBit | (maxExp << f.manBits) | payload;
}

/// Rounds fp32 \p x to format \p f (RNE) and returns its bit pattern.
uint32_t encode(float x, const Format &f) {
  uint32_t in = toF32Bits(x);
  uint32_t signBit = (in >> 31) << (f.expBits + f.manBits);
  uint32_t inExp = (in >> 23) & 0xFF;
  uint32_t inMan = in & kF32ManMask;
  if (inExp == 0xFF)
    return inMan ? nanBits(f, signBit, inMan) : overflowBits(f, signBit);
  if (inExp == 0 && inMan == 0)
    return signBit;

  // |x| = sig * 2^e exactly.
  uint64_t sig = inExp ? (inMan | (kF32ManMask + 1)) : inMan;
  int e = inExp ? int(inExp) - 150 : -149;
  int valueExp = e + highestBit(sig); // floor(log2 |x|)
  int minExp = 1 - f.bias;            // exponent of the smallest normal
  // The target's quantum (value of one mantissa ulp) at |x|'s binade;
  // below the normal range it is the subnormal quantum.
  int q = std::max(valueExp, minExp) - f.manBits;
  uint64_t r = shiftRightRNE(sig, q - e); // |x| ~= r * 2^q
  if (r == 0)
    return signBit;
  // Rounding up may carry into the next binade: r == 2^(manBits+1).
  if (r >> (f.manBits + 1)) {
    r >>= 1;
    ++q;
  }
  uint64_t implicitBit = uint64_t(1) << f.manBits;
  if (r < implicitBit) // still subnormal (q is the subnormal quantum)
    return signBit | uint32_t(r);
  int biasedExp = q + f.manBits + f.bias;
  uint32_t man = uint32_t(r - implicitBit);
  int maxExp = (1 << f.expBits) - 1;
  bool overflow =
      f.hasInf ? biasedExp >= maxExp
               : biasedExp > maxExp || (biasedExp == maxExp &&
                                        man == (uint32_t(implicitBit) - 1));
  if (overflow)
    return overflowBits(f, signBit);
  return signBit | (uint32_t(biasedExp) << f.manBits) | man;
}

/// Decodes a bit pattern of format \p f to fp32 (always exact).
float decode(uint32_t bits, const Format &f) {
  uint32_t sign = (bits >> (f.expBits + f.manBits)) & 1;
  uint32_t manMask = (1u << f.manBits) - 1;
  uint32_t exp = (bits >> f.manBits) & ((1u << f.expBits) - 1);
  uint32_t man = bits & manMask;
  uint32_t maxExp = (1u << f.expBits) - 1;
  if (f.hasInf && exp == maxExp)
    return fromF32Bits((sign << 31) | (0xFFu << 23) |
                       (man << (23 - f.manBits)));
  if (!f.hasInf && exp == maxExp && man == manMask)
    return fromF32Bits((sign << 31) | 0x7FC00000u);
  float magnitude = exp == 0 ? std::ldexp(float(man), 1 - f.bias - f.manBits)
                             : std::ldexp(float(man | (manMask + 1)),
                                          int(exp) - f.bias - f.manBits);
  return sign ? -magnitude : magnitude;
}

} // namespace

uint32_t toF32Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float fromF32Bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

const char *toString(ParamType type) {
  switch (type) {
  case ParamType::F32:
    return "f32";
  case ParamType::F16:
    return "f16";
  case ParamType::BF16:
    return "bf16";
  case ParamType::F8E4M3:
    return "f8E4M3";
  }
  return "?";
}

int bitWidth(ParamType type) {
  switch (type) {
  case ParamType::F32:
    return 32;
  case ParamType::F16:
  case ParamType::BF16:
    return 16;
  case ParamType::F8E4M3:
    return 8;
  }
  return 0;
}

uint16_t toF16Bits(float x) { return uint16_t(encode(x, kF16)); }
float fromF16Bits(uint16_t bits) { return decode(bits, kF16); }

uint16_t toBF16Bits(float x) { return uint16_t(encode(x, kBF16)); }
float fromBF16Bits(uint16_t bits) { return decode(bits, kBF16); }

uint8_t toF8E4M3Bits(float x) { return uint8_t(encode(x, kE4M3)); }
float fromF8E4M3Bits(uint8_t bits) { return decode(bits, kE4M3); }

uint32_t toParamBits(float x, ParamType type) {
  switch (type) {
  case ParamType::F32:
    return toF32Bits(x);
  case ParamType::F16:
    return toF16Bits(x);
  case ParamType::BF16:
    return toBF16Bits(x);
  case ParamType::F8E4M3:
    return toF8E4M3Bits(x);
  }
  return 0;
}

float fromParamBits(uint32_t bits, ParamType type) {
  switch (type) {
  case ParamType::F32:
    return fromF32Bits(bits);
  case ParamType::F16:
    return fromF16Bits(uint16_t(bits));
  case ParamType::BF16:
    return fromBF16Bits(uint16_t(bits));
  case ParamType::F8E4M3:
    return fromF8E4M3Bits(uint8_t(bits));
  }
  return 0;
}

float maxParam(ParamType type) {
  switch (type) {
  case ParamType::F32:
    return std::numeric_limits<float>::max();
  case ParamType::F16:
    return 65504.0f;
  case ParamType::BF16:
    return fromBF16Bits(0x7f7f);
  case ParamType::F8E4M3:
    return 448.0f;
  }
  return 0.0f;
}

bool exceedsParam(float x, ParamType type) {
  return std::fabs(x) > maxParam(type);
}

float storeParam(float x, ParamType type) {
  // Saturate, then round: below the overflow threshold RNE gives the same
  // value, above it the largest finite value instead of an infinity.
  float limit = maxParam(type);
  float clamped = std::min(std::max(x, -limit), limit);
  return fromParamBits(toParamBits(clamped, type), type);
}

} // namespace kvq::ref
