//===- DTypesTest.cpp - Model dtype conversions ---------------------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// The runtime's fp32 -> f16/bf16 rounding (the f32 convenience API) must be
// bit-identical to the reference's independent conversions.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/FloatFormats.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>

using namespace kvq::runtime;

namespace {

std::vector<float> interestingFloats() {
  std::vector<float> V = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          1e6f,
                          6.1e-5f,
                          5.96e-8f,
                          2.98e-8f,
                          2.99e-8f,
                          1e-10f,
                          -3.0e-6f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          3.3895e38f};
  std::mt19937 Rng(11);
  std::uniform_int_distribution<uint32_t> Bits;
  for (int I = 0; I < 200000; ++I) {
    float X = kvq::ref::fromF32Bits(Bits(Rng));
    if (!std::isnan(X))
      V.push_back(X);
  }
  // Every f16 value and the midpoints around it.
  for (uint32_t H = 0; H < 0x7c00; ++H) {
    float X = kvq::ref::fromF16Bits(uint16_t(H));
    V.push_back(X);
    V.push_back(std::nextafter(X, 1e9f));
    V.push_back(-std::nextafter(X, 0.0f));
  }
  return V;
}

TEST(DTypesTest, F16MatchesTheReference) {
  std::vector<float> V = interestingFloats();
  std::vector<uint16_t> Out(V.size());
  convertFromF32(DType::F16, V.data(), V.size(), Out.data());
  for (size_t I = 0; I < V.size(); ++I)
    ASSERT_EQ(Out[I], kvq::ref::toF16Bits(V[I])) << V[I];
  std::vector<float> Back(V.size());
  convertToF32(DType::F16, Out.data(), Out.size(), Back.data());
  for (size_t I = 0; I < V.size(); ++I)
    ASSERT_EQ(kvq::ref::toF32Bits(Back[I]),
              kvq::ref::toF32Bits(kvq::ref::fromF16Bits(Out[I])));
}

TEST(DTypesTest, BF16MatchesTheReference) {
  std::vector<float> V = interestingFloats();
  std::vector<uint16_t> Out(V.size());
  convertFromF32(DType::BF16, V.data(), V.size(), Out.data());
  for (size_t I = 0; I < V.size(); ++I)
    ASSERT_EQ(Out[I], kvq::ref::toBF16Bits(V[I])) << V[I];
}

TEST(DTypesTest, FindsNonFiniteValues) {
  std::vector<uint16_t> H = {0x3c00, 0x7bff, 0xfbff, 0x7c00};
  EXPECT_EQ(findNonFinite(DType::F16, H.data(), 4), 3u);
  EXPECT_EQ(findNonFinite(DType::F16, H.data(), 3), 3u);
  std::vector<uint16_t> B = {0x3f80, 0x7f7f, 0xffc0};
  EXPECT_EQ(findNonFinite(DType::BF16, B.data(), 3), 2u);
  std::vector<float> F = {1.0f, std::numeric_limits<float>::max(), NAN};
  EXPECT_EQ(findNonFinite(DType::F32, F.data(), 3), 2u);
}

// Every 16-bit pattern, placed in the second block of a longer buffer of
// finite values: found (at its index) exactly when it is an infinity or a
// NaN of the type.
TEST(DTypesTest, FindsEveryNonFinite16BitPattern) {
  constexpr size_t N = 600, At = 300;
  for (DType Type : {DType::F16, DType::BF16}) {
    uint16_t Exponent = Type == DType::F16 ? 0x7c00 : 0x7f80;
    std::vector<uint16_t> Row(N, Type == DType::F16 ? 0xfbff : 0xff7f);
    for (uint32_t Bits = 0; Bits <= 0xffff; ++Bits) {
      Row[At] = uint16_t(Bits);
      size_t Expected = (Bits & Exponent) == Exponent ? At : N;
      ASSERT_EQ(findNonFinite(Type, Row.data(), N), Expected)
          << toString(Type) << " bits 0x" << std::hex << Bits;
    }
  }
}

TEST(DTypesTest, FindsNonFiniteF32AmongLargeFiniteValues) {
  constexpr size_t N = 600;
  float Inf = std::numeric_limits<float>::infinity();
  std::vector<float> Row(N, -std::numeric_limits<float>::max());
  EXPECT_EQ(findNonFinite(DType::F32, Row.data(), N), N);
  for (float Bad : {Inf, -Inf, NAN, -NAN}) {
    Row[599] = Bad;
    EXPECT_EQ(findNonFinite(DType::F32, Row.data(), N), 599u) << Bad;
    Row[299] = Bad;
    EXPECT_EQ(findNonFinite(DType::F32, Row.data(), N), 299u) << Bad;
    Row[299] = Row[599] = 1.0f;
  }
}

} // namespace
