//===- RotationTest.cpp - Hadamard rotation before quantization -*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// docs/Numerics.md, "Hadamard rotation", in the reference: the fp32 fast
// Walsh-Hadamard transform against the dense orthonormal matrix in fp64,
// its inverse, the seeded signs, a rotated slice's codes as the quantizer's
// codes of the rotated rows, and the claim that rotation lowers per-token
// error on rows with outlier channels, measured on synthetic keys.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Rotation.h"
#include "kvq/Reference/FloatFormats.h"
#include "kvq/Reference/Slice.h"

#include "RandomRows.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <vector>

using namespace kvq::ref;
using kvq::ref::test::normalRows;

namespace {

RotationConfig hadamard(bool seeded = false, uint32_t seed = 0) {
  RotationConfig r;
  r.enabled = true;
  r.seeded = seeded;
  r.seed = seed;
  return r;
}

/// R x in fp64 from the definition: sum_j H[i][j] s[j] x[j] / sqrt(n).
std::vector<double> denseRotation(const RotationConfig &r,
                                  const std::vector<float> &x) {
  int n = int(x.size());
  std::vector<float> signs = rotationSigns(r, n);
  std::vector<double> y(n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double h = __builtin_popcount(unsigned(i & j)) % 2 ? -1.0 : 1.0;
      y[i] += h * double(signs[j]) * double(x[j]);
    }
    y[i] /= std::sqrt(double(n));
  }
  return y;
}

QuantScheme perToken(int bits, int group) {
  QuantScheme s;
  s.bits = bits;
  s.mode = Mode::Asym;
  s.span = Span::Channels;
  s.groupSize = group;
  return s;
}

TEST(Rotation, TransformIsTheDenseOrthonormalMatrix) {
  for (int n : {1, 2, 4, 8, 32, 64, 128, 256})
    for (bool seeded : {false, true}) {
      RotationConfig r = hadamard(seeded, 7);
      std::vector<float> x = normalRows(1, n, unsigned(n));
      std::vector<double> want = denseRotation(r, x);
      std::vector<float> y = x;
      rotateForward(r, y.data(), n);
      double norm = 0.0;
      for (float v : x)
        norm += double(v) * v;
      for (int i = 0; i < n; ++i)
        EXPECT_NEAR(y[i], want[i], 1e-6 * std::sqrt(norm)) << n << " " << i;
      // The fp32 inverse undoes it within rounding; the fp64 one too.
      std::vector<float> back = y;
      rotateInverse(r, back.data(), n);
      std::vector<double> back64(y.begin(), y.end());
      rotateInverse(r, back64.data(), n);
      for (int i = 0; i < n; ++i) {
        EXPECT_NEAR(back[i], x[i], 1e-6 * std::sqrt(norm));
        EXPECT_NEAR(back64[i], x[i], 1e-6 * std::sqrt(norm));
      }
    }
}

TEST(Rotation, ArithmeticIsTheDocumentedSequence) {
  // n = 4: stage 1 pairs (0,1), (2,3); stage 2 pairs (0,2), (1,3); then one
  // multiplication by float(1/sqrt(4)) = 0.5.
  const float x[4] = {1.0f, 1e-8f, -3.0f, 0.1f};
  float a = x[0] + x[1], b = x[0] - x[1], c = x[2] + x[3], d = x[2] - x[3];
  const float want[4] = {(a + c) * 0.5f, (b + d) * 0.5f, (a - c) * 0.5f,
                         (b - d) * 0.5f};
  float y[4] = {x[0], x[1], x[2], x[3]};
  rotateForward(hadamard(), y, 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(toF32Bits(y[i]), toF32Bits(want[i])) << i;
  EXPECT_EQ(rotationScale(64), 0.125f);
  EXPECT_EQ(rotationScale(128), float(1.0 / std::sqrt(128.0)));
}

TEST(Rotation, SeededSignsAreSplitmix64Bits) {
  // splitmix64's first output from state 0 is 0xE220A8397B1DCDAF: its low
  // bits, 1 meaning -1, are the first channels' signs.
  std::vector<float> signs = rotationSigns(hadamard(true, 0), 8);
  const uint64_t first = 0xE220A8397B1DCDAFull;
  for (int c = 0; c < 8; ++c)
    EXPECT_EQ(signs[c], (first >> c) & 1 ? -1.0f : 1.0f) << c;
  // Deterministic for a seed, different across seeds, all +1 unseeded.
  EXPECT_EQ(rotationSigns(hadamard(true, 7), 128),
            rotationSigns(hadamard(true, 7), 128));
  EXPECT_NE(rotationSigns(hadamard(true, 7), 128),
            rotationSigns(hadamard(true, 8), 128));
  for (float s : rotationSigns(hadamard(), 128))
    EXPECT_EQ(s, 1.0f);
  int negative = 0;
  for (float s : rotationSigns(hadamard(true, 7), 128))
    negative += s < 0;
  EXPECT_GT(negative, 32);
  EXPECT_LT(negative, 96);
}

TEST(Rotation, SliceQuantizesTheRotatedRows) {
  const int d = 64, n = 9;
  SliceConfig config;
  config.headDim = d;
  config.key = {perToken(4, 32), 0, 1, 1};
  config.key.rotation = hadamard(true, 3);
  config.value = {perToken(2, 16), 1, 2, 1};
  config.value.rotation = hadamard();
  ASSERT_EQ(validate(config), "");
  Slice slice(config);
  std::vector<float> k = normalRows(n, d, 1), v = normalRows(n, d, 2);
  slice.append(k.data(), v.data(), n);
  for (const auto &[side, rows, rotation] :
       {std::tuple(&slice.keys(), &k, config.key.rotation),
        std::tuple(&slice.values(), &v, config.value.rotation)}) {
    int first = side->numSink();
    for (int t = 0; t < side->numQuantized(); ++t) {
      std::vector<float> row(rows->begin() + size_t(first + t) * d,
                             rows->begin() + size_t(first + t + 1) * d);
      rotateForward(rotation, row.data(), d);
      int g = side->scheme().groupSize;
      for (int j = 0; j < d / g; ++j) {
        QuantizedGroup want =
            quantizeGroup(side->scheme(), row.data() + j * g, g);
        int group = side->groupOf(t, j * g);
        EXPECT_EQ(side->groupCodes(group), want.codes);
        EXPECT_EQ(toF32Bits(side->scales()[group]), toF32Bits(want.scale));
        EXPECT_EQ(toF32Bits(side->zeros()[group]), toF32Bits(want.zero));
      }
    }
  }
}

TEST(Rotation, LowersPerTokenErrorWithOutlierChannels) {
  // 4-bit per-token groups of 64 (span = channels): four channels offset by
  // +-20 set every group's range; rotated, the outliers spread over the
  // head.
  const int d = 64, n = 256;
  std::vector<float> k = normalRows(n, d, 11);
  for (int t = 0; t < n; ++t)
    for (int c : {3, 17, 40, 41})
      k[size_t(t) * d + c] += c % 2 ? -20.0f : 20.0f;
  double error[2];
  for (int rotated = 0; rotated < 2; ++rotated) {
    SliceConfig config;
    config.headDim = d;
    config.key = {perToken(4, 64), 0, 0, 1};
    config.value = config.key;
    if (rotated)
      config.key.rotation = hadamard();
    Slice slice(config);
    slice.append(k.data(), k.data(), n);
    std::vector<float> kHat = slice.dequantizedKeys();
    double num = 0, den = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      num += (double(kHat[i]) - k[i]) * (double(kHat[i]) - k[i]);
      den += double(k[i]) * k[i];
    }
    error[rotated] = std::sqrt(num / den);
  }
  std::printf("relative key error: %.4f unrotated, %.4f rotated\n", error[0],
              error[1]);
  EXPECT_LT(error[1], error[0] / 1.5); // 0.153 -> 0.082
}

TEST(Rotation, Validation) {
  SliceConfig config;
  config.headDim = 96;
  config.key = {perToken(4, 32), 0, 1, 1};
  config.value = config.key;
  config.key.rotation = hadamard();
  EXPECT_NE(validate(config).find("power of two"), std::string::npos);
  config.headDim = 64;
  EXPECT_EQ(validate(config), "");
  config.keyNorm = true;
  EXPECT_NE(validate(config).find("key norms"), std::string::npos);
  config.keyNorm = false;
  config.key.perm.resize(64);
  for (int c = 0; c < 64; ++c)
    config.key.perm[c] = c;
  config.key.groupSizes = {32, 32};
  EXPECT_NE(validate(config).find("reorder"), std::string::npos);
  config.key.perm.clear();
  config.key.groupSizes.clear();
  config.pool.capacity = 1;
  EXPECT_NE(validate(config).find("pools"), std::string::npos);
  config.pool.capacity = 0;
  config.key.rotation = {};
  config.key.rotation.seeded = true;
  EXPECT_NE(validate(config).find("seed"), std::string::npos);
}

} // namespace
