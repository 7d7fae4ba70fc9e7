//===- FloatTest.cpp - Software float formats and rounding ----------------===//

#include "kvq/Support/Float.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace kvq::fp;

namespace {

float floatOf(uint32_t B) {
  float F;
  std::memcpy(&F, &B, 4);
  return F;
}

TEST(FloatTest, EveryHalfRoundTrips) {
  for (uint32_t H = 0; H < 0x10000; ++H) {
    float F = halfToFloat(static_cast<uint16_t>(H));
    bool IsNaN = (H & 0x7c00) == 0x7c00 && (H & 0x3ff);
    if (IsNaN) {
      EXPECT_TRUE(std::isnan(F));
      EXPECT_EQ(floatToHalf(F), 0x7fff);
      continue;
    }
    for (RoundingMode M : {RoundingMode::NearestEven, RoundingMode::TowardZero,
                           RoundingMode::Down, RoundingMode::Up})
      ASSERT_EQ(floatToHalf(F, M), H) << std::hex << H;
  }
}

TEST(FloatTest, EveryE4M3RoundTrips) {
  for (uint32_t B = 0; B < 0x100; ++B) {
    float F = e4m3ToFloat(static_cast<uint8_t>(B));
    if ((B & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(F));
      continue;
    }
    EXPECT_EQ(floatToE4M3(F), B) << std::hex << B;
  }
  EXPECT_EQ(e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
}

#if defined(__FLT16_MAX__)
TEST(FloatTest, NearestEvenHalfMatchesCompiler) {
  std::mt19937 Rng(1);
  for (int I = 0; I < 200000; ++I) {
    float F = floatOf(Rng());
    if (std::isnan(F))
      continue;
    _Float16 H = static_cast<_Float16>(F);
    uint16_t Bits;
    std::memcpy(&Bits, &H, 2);
    ASSERT_EQ(floatToHalf(F), Bits) << F;
  }
}
#endif

TEST(FloatTest, NearestEvenBF16MatchesBitTrick) {
  std::mt19937 Rng(2);
  for (int I = 0; I < 200000; ++I) {
    uint32_t B = Rng();
    if (std::isnan(floatOf(B)))
      continue;
    // Round half to even on the upper 16 bits.
    uint32_t Rounded = B + 0x7fff + ((B >> 16) & 1);
    uint16_t Expected = static_cast<uint16_t>(Rounded >> 16);
    ASSERT_EQ(floatToBF16(floatOf(B)), Expected) << std::hex << B;
  }
}

TEST(FloatTest, DirectedModesBracketTheValue) {
  std::mt19937 Rng(3);
  for (int I = 0; I < 100000; ++I) {
    float F = std::ldexp(static_cast<float>(Rng() % 1000000) / 1e6f - 0.5f,
                         static_cast<int>(Rng() % 50) - 30);
    for (const FloatFormat *Fmt : {&FloatFormat::F16, &FloatFormat::BF16}) {
      if (std::fabs(F) > Fmt->maxFinite())
        continue;
      double Dn = decodeFloat(encodeFloat(F, *Fmt, RoundingMode::Down), *Fmt);
      double Up = decodeFloat(encodeFloat(F, *Fmt, RoundingMode::Up), *Fmt);
      double Z =
          decodeFloat(encodeFloat(F, *Fmt, RoundingMode::TowardZero), *Fmt);
      double N =
          decodeFloat(encodeFloat(F, *Fmt, RoundingMode::NearestEven), *Fmt);
      ASSERT_LE(Dn, F);
      ASSERT_GE(Up, F);
      ASSERT_EQ(Z, F >= 0 ? Dn : Up);
      ASSERT_TRUE(N == Dn || N == Up);
      ASSERT_LE(std::fabs(N - F), std::fabs((N == Dn ? Up : Dn) - F));
    }
  }
}

TEST(FloatTest, SaturationAndOverflow) {
  EXPECT_EQ(floatToE4M3(1e9f), 0x7e);
  EXPECT_EQ(floatToE4M3(-1e9f), 0xfe);
  EXPECT_EQ(floatToE4M3(1e9f, RoundingMode::NearestEven, false), 0x7f);
  EXPECT_EQ(floatToHalf(1e9f, RoundingMode::NearestEven, true), 0x7bff);
  EXPECT_EQ(floatToHalf(1e9f, RoundingMode::TowardZero), 0x7bff);
  EXPECT_EQ(floatToHalf(-1e9f, RoundingMode::Up), 0xfbff);
  EXPECT_EQ(floatToHalf(-1e9f, RoundingMode::Down), 0xfc00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}

TEST(FloatTest, RoundToOddGivesCorrectNarrowRounding) {
  // 1 + 2^-11 + 2^-60 must round up to f16 even though the double sum
  // 1 + 2^-11 alone would be a tie.
  double V = addRoundToOdd(1.0 + std::ldexp(1.0, -11), std::ldexp(1.0, -60));
  EXPECT_EQ(encodeFloat(V, FloatFormat::F16, RoundingMode::NearestEven),
            0x3c01u);
  EXPECT_EQ(roundDoubleAdd(1.0, std::ldexp(1.0, -60), RoundingMode::Up),
            std::nextafter(1.0, 2.0));
  EXPECT_EQ(roundDoubleAdd(1.0, std::ldexp(1.0, -60), RoundingMode::Down), 1.0);
  EXPECT_EQ(roundDoubleDiv(1.0, 3.0, RoundingMode::Up),
            std::nextafter(1.0 / 3.0, 1.0));
  EXPECT_EQ(roundDoubleFromInt(INT64_MAX, true, RoundingMode::TowardZero),
            std::nextafter(9223372036854775808.0, 0.0));
}

} // namespace
