//===- FloatFormatsTest.cpp - Parameter dtype conversions -------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// Exhaustive round trips, hand-picked encodings, and a brute-force oracle:
// for a format, list every finite non-negative value in order and round by
// searching that list, which shares nothing with the bit-twiddling encoder.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/FloatFormats.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using namespace kvq::ref;

namespace {

/// One narrow format seen through the public API only.
struct FormatUnderTest {
  const char *name;
  int totalBits;
  std::function<uint32_t(float)> encode;
  std::function<float(uint32_t)> decode;
  /// true: IEEE overflow to inf; false: saturation to the max.
  bool overflowsToInf;
};

std::vector<FormatUnderTest> allFormats() {
  return {
      {"f16", 16, [](float x) { return uint32_t(toF16Bits(x)); },
       [](uint32_t b) { return fromF16Bits(uint16_t(b)); }, true},
      {"bf16", 16, [](float x) { return uint32_t(toBF16Bits(x)); },
       [](uint32_t b) { return fromBF16Bits(uint16_t(b)); }, true},
      {"f8E4M3", 8, [](float x) { return uint32_t(toF8E4M3Bits(x)); },
       [](uint32_t b) { return fromF8E4M3Bits(uint8_t(b)); }, false},
  };
}

/// Every finite non-negative value of a format, ascending, with its bits
/// (bit patterns of non-negative values are ordered like their values).
struct ValueList {
  std::vector<double> values;
  std::vector<uint32_t> bits;
};

ValueList finiteNonNegative(const FormatUnderTest &f) {
  ValueList list;
  uint32_t signBit = 1u << (f.totalBits - 1);
  for (uint32_t b = 0; b < signBit; ++b) {
    float v = f.decode(b);
    if (std::isfinite(v)) {
      list.values.push_back(v);
      list.bits.push_back(b);
    }
  }
  return list;
}

/// Rounds non-negative finite x by searching the value list.
uint32_t oracleRound(const FormatUnderTest &f, const ValueList &list,
                     double x) {
  const std::vector<double> &v = list.values;
  uint32_t maxBits = list.bits.back();
  if (x >= v.back()) {
    if (!f.overflowsToInf)
      return maxBits;
    // IEEE: the next step above max is 2^(emax+1) (even mantissa, = inf).
    double step = v.back() - v[v.size() - 2];
    double half = v.back() + step / 2;
    return x >= half ? maxBits + 1 : maxBits;
  }
  size_t hi = std::upper_bound(v.begin(), v.end(), x) - v.begin();
  size_t lo = hi - 1;
  double dLo = x - v[lo], dHi = v[hi] - x;
  if (dLo < dHi)
    return list.bits[lo];
  if (dHi < dLo)
    return list.bits[hi];
  return (list.bits[lo] & 1) ? list.bits[hi] : list.bits[lo];
}

void expectMatchesOracle(const FormatUnderTest &f, const ValueList &list,
                         float x) {
  uint32_t signBit = 1u << (f.totalBits - 1);
  uint32_t expected = oracleRound(f, list, std::fabs(double(x)));
  if (std::signbit(x))
    expected |= signBit;
  ASSERT_EQ(f.encode(x), expected) << f.name << " x=" << x;
}

TEST(FloatFormats, AllPatternsRoundTrip) {
  for (const FormatUnderTest &f : allFormats())
    for (uint32_t b = 0; b < (1u << f.totalBits); ++b)
      ASSERT_EQ(f.encode(f.decode(b)), b) << f.name << " bits=" << b;
}

TEST(FloatFormats, DecodesKnownValues) {
  EXPECT_EQ(fromF16Bits(0x3C00), 1.0f);
  EXPECT_EQ(fromF16Bits(0x7BFF), 65504.0f);
  EXPECT_EQ(fromF16Bits(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fromF16Bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fromF16Bits(0xC000), -2.0f);
  EXPECT_EQ(fromF16Bits(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fromF16Bits(0x7E00)));
  EXPECT_TRUE(std::signbit(fromF16Bits(0x8000)));

  EXPECT_EQ(fromBF16Bits(0x3F80), 1.0f);
  EXPECT_EQ(fromBF16Bits(0x7F7F), std::ldexp(255.0f, 120));
  EXPECT_EQ(fromBF16Bits(0x0001), std::ldexp(1.0f, -133));

  EXPECT_EQ(fromF8E4M3Bits(0x38), 1.0f);
  EXPECT_EQ(fromF8E4M3Bits(0x7E), 448.0f);
  EXPECT_EQ(fromF8E4M3Bits(0xFE), -448.0f);
  EXPECT_EQ(fromF8E4M3Bits(0x78), 256.0f);
  EXPECT_EQ(fromF8E4M3Bits(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fromF8E4M3Bits(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fromF8E4M3Bits(0x07), std::ldexp(7.0f, -9));
  EXPECT_TRUE(std::isnan(fromF8E4M3Bits(0x7F)));
  EXPECT_TRUE(std::isnan(fromF8E4M3Bits(0xFF)));
}

TEST(FloatFormats, F16TiesAndOverflow) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(toF16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between odd 0x3C01 and even 0x3C02.
  EXPECT_EQ(toF16Bits(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
  EXPECT_EQ(toF16Bits(65504.0f), 0x7BFF);
  EXPECT_EQ(toF16Bits(65519.99f), 0x7BFF);
  EXPECT_EQ(toF16Bits(65520.0f), 0x7C00); // max + half ulp: ties up to inf
  EXPECT_EQ(toF16Bits(-1e10f), 0xFC00);
  // Subnormals: half the smallest subnormal ties to zero, more rounds up.
  EXPECT_EQ(toF16Bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(toF16Bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(toF16Bits(std::ldexp(3.0f, -25)), 0x0002); // 1.5 ulp: to even
  EXPECT_EQ(toF16Bits(-std::ldexp(1.0f, -30)), 0x8000);
  // Largest subnormal rounding up into the smallest normal.
  EXPECT_EQ(toF16Bits(std::ldexp(2047.0f, -25)), 0x0400);
  EXPECT_EQ(toF16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(FloatFormats, BF16TiesAndOverflow) {
  EXPECT_EQ(toBF16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(toBF16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  EXPECT_EQ(toBF16Bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            0x3F81);
  EXPECT_EQ(toBF16Bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(toBF16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(toBF16Bits(std::ldexp(3.0f, -134)), 0x0002);
}

TEST(FloatFormats, E4M3SaturatesNeverNaN) {
  EXPECT_EQ(toF8E4M3Bits(448.0f), 0x7E);
  EXPECT_EQ(toF8E4M3Bits(464.0f), 0x7E); // would tie to the NaN pattern
  EXPECT_EQ(toF8E4M3Bits(480.0f), 0x7E);
  EXPECT_EQ(toF8E4M3Bits(1e30f), 0x7E);
  EXPECT_EQ(toF8E4M3Bits(-1e30f), 0xFE);
  EXPECT_EQ(toF8E4M3Bits(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(toF8E4M3Bits(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(storeParam(1000.0f, ParamType::F8E4M3), 448.0f);
  // Ties: 1 + 1/16 between 1 (even) and 1.125; 1 + 3/16 to 1.25 (even).
  EXPECT_EQ(toF8E4M3Bits(1.0625f), 0x38);
  EXPECT_EQ(toF8E4M3Bits(1.1875f), 0x3A);
  // Subnormal ties: 2^-10 -> 0, 3 * 2^-10 -> 2 * 2^-9 (even).
  EXPECT_EQ(toF8E4M3Bits(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(toF8E4M3Bits(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(toF8E4M3Bits(std::ldexp(15.0f, -10)), 0x08); // into min normal
  EXPECT_TRUE(std::isnan(
      fromF8E4M3Bits(toF8E4M3Bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(FloatFormats, NaNStaysNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(storeParam(nan, ParamType::F16)));
  EXPECT_TRUE(std::isnan(storeParam(nan, ParamType::BF16)));
  // A payload only in the low fp32 bits still gives a NaN, not an inf.
  float lowPayload = fromF32Bits(0x7F800001);
  EXPECT_TRUE(std::isnan(storeParam(lowPayload, ParamType::F16)));
  EXPECT_TRUE(std::isnan(storeParam(lowPayload, ParamType::BF16)));
}

/// Inputs around every value of a format: the value, its midpoints with
/// both neighbours, and the floats adjacent to those midpoints.
std::vector<float> probesAround(const ValueList &list) {
  std::vector<float> probes;
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < list.values.size(); ++i) {
    float v = float(list.values[i]);
    probes.push_back(v);
    probes.push_back(std::nextafter(v, inf));
    if (i + 1 < list.values.size()) {
      float mid = float((list.values[i] + list.values[i + 1]) / 2);
      probes.push_back(mid);
      probes.push_back(std::nextafter(mid, 0.0f));
      probes.push_back(std::nextafter(mid, inf));
    }
  }
  return probes;
}

TEST(FloatFormats, MatchesOracleAtEveryMidpoint) {
  for (const FormatUnderTest &f : allFormats()) {
    ValueList list = finiteNonNegative(f);
    for (float x : probesAround(list)) {
      expectMatchesOracle(f, list, x);
      expectMatchesOracle(f, list, -x);
    }
  }
}

TEST(FloatFormats, MatchesOracleOnRandomFloats) {
  std::mt19937 rng(7);
  for (const FormatUnderTest &f : allFormats()) {
    ValueList list = finiteNonNegative(f);
    for (int i = 0; i < 200000; ++i) {
      float x = fromF32Bits(uint32_t(rng()));
      if (std::isfinite(x))
        expectMatchesOracle(f, list, x);
    }
  }
}

#ifdef __FLT16_MAX__
// Cross-check against the compiler's own binary16 conversion.
TEST(FloatFormats, F16MatchesCompilerConversion) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    float x = fromF32Bits(uint32_t(rng()));
    if (std::isnan(x))
      continue;
    _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof(bits));
    ASSERT_EQ(toF16Bits(x), bits) << x;
  }
}
#endif

TEST(FloatFormats, StoreParam) {
  EXPECT_EQ(toF32Bits(storeParam(0.1f, ParamType::F32)), toF32Bits(0.1f));
  EXPECT_EQ(storeParam(0.1f, ParamType::F16), fromF16Bits(0x2E66));
  EXPECT_EQ(storeParam(0.1f, ParamType::BF16), fromBF16Bits(0x3DCD));
  EXPECT_EQ(storeParam(0.1f, ParamType::F8E4M3), 0.1015625f);
  EXPECT_TRUE(std::signbit(storeParam(-0.0f, ParamType::F8E4M3)));
  EXPECT_EQ(toParamBits(-448.0f, ParamType::F8E4M3), 0xFEu);
  EXPECT_EQ(fromParamBits(0x3C00, ParamType::F16), 1.0f);
  EXPECT_EQ(bitWidth(ParamType::F8E4M3), 8);
  EXPECT_STREQ(toString(ParamType::BF16), "bf16");
}

} // namespace
