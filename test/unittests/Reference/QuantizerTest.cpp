//===- QuantizerTest.cpp - Per-group quantizers -----------------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// Small groups whose codes and parameters were worked out by hand from
// numerics.md section 3, plus randomized error bounds.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Quantizer.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <vector>

using namespace kvq::ref;

namespace {

QuantScheme makeScheme(Mode mode, int bits, ParamType params) {
  QuantScheme scheme;
  scheme.mode = mode;
  scheme.bits = bits;
  scheme.params = params;
  return scheme;
}

QuantizedGroup quantize(const QuantScheme &scheme,
                        const std::vector<float> &x) {
  return quantizeGroup(scheme, x.data(), int(x.size()));
}

std::vector<float> reconstruct(const QuantScheme &scheme,
                               const QuantizedGroup &group) {
  std::vector<float> out(group.codes.size());
  dequantizeGroup(scheme, group, out.data());
  return out;
}

using Codes = std::vector<uint32_t>;

TEST(Quantizer, Asym2BitExactGrid) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F32);
  std::vector<float> x = {0, 1, 2, 3, 1.4f, 1.6f, 2.5f, 0.5f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 1.0f);
  EXPECT_EQ(g.zero, 0.0f);
  // 2.5 and 0.5 are ties: to even.
  EXPECT_EQ(g.codes, (Codes{0, 1, 2, 3, 1, 2, 2, 0}));
  EXPECT_EQ(reconstruct(scheme, g),
            (std::vector<float>{0, 1, 2, 3, 1, 2, 2, 0}));
}

TEST(Quantizer, Asym2BitNegativeInputs) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  std::vector<float> x = {-3, -2, -1, -0.0f, -2.6f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 1.0f);
  EXPECT_EQ(g.zero, -3.0f);
  EXPECT_EQ(g.codes, (Codes{0, 1, 2, 3, 0}));
}

TEST(Quantizer, AsymCodesFromRoundedScale) {
  // s = 1/3 rounds to f16 0x3555 = 0.33325195; 0.4999 / s = 1.50004 -> 2,
  // whereas the fp32 scale 0.33333334 gives 1.4997 -> 1.
  std::vector<float> x = {0, 0.4999f, 1};
  QuantizedGroup f16 = quantize(makeScheme(Mode::Asym, 2, ParamType::F16), x);
  EXPECT_EQ(f16.scale, fromF16Bits(0x3555));
  EXPECT_EQ(f16.codes, (Codes{0, 2, 3}));
  QuantizedGroup f32 = quantize(makeScheme(Mode::Asym, 2, ParamType::F32), x);
  EXPECT_EQ(f32.scale, 1.0f / 3.0f);
  EXPECT_EQ(f32.codes, (Codes{0, 1, 3}));
}

TEST(Quantizer, Asym1Bit) {
  QuantScheme scheme = makeScheme(Mode::Asym, 1, ParamType::F16);
  std::vector<float> x = {-2, 0.9f, 1, 3, 0.5f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 5.0f);
  EXPECT_EQ(g.zero, -2.0f);
  // (x + 2) / 5: 0, 0.58, 0.6, 1, 0.5 (tie to even 0).
  EXPECT_EQ(g.codes, (Codes{0, 1, 1, 1, 0}));
  EXPECT_EQ(reconstruct(scheme, g), (std::vector<float>{-2, 3, 3, 3, -2}));
}

TEST(Quantizer, TernaryLevels) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  scheme.levels = 3;
  std::vector<float> x = {0, 1, 2, 4, 3, 3.9f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 2.0f); // (4 - 0) / (3 - 1)
  EXPECT_EQ(g.codes, (Codes{0, 0, 1, 2, 2, 2}));
}

TEST(Quantizer, ClippedAsym) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F32);
  scheme.clip = 0.92f;
  std::vector<float> x = {-1, 0, 1, 2};
  QuantizedGroup g = quantize(scheme, x);
  float lo = 0.92f * -1.0f, hi = 0.92f * 2.0f;
  EXPECT_EQ(g.zero, lo);
  EXPECT_EQ(g.scale, (hi - lo) / 3.0f);
  EXPECT_NEAR(g.scale, 0.92f, 1e-6f);
  // (x + 0.92) / 0.92: -0.087 -> 0, 1, 2.09 -> 2, 3.17 -> clamped 3.
  EXPECT_EQ(g.codes, (Codes{0, 1, 2, 3}));
}

TEST(Quantizer, ConstantGroupAsym) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  std::vector<float> x(5, 0.1f);
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 0.0f);
  EXPECT_EQ(g.zero, storeParam(0.1f, ParamType::F16));
  EXPECT_EQ(g.codes, Codes(5, 0));
  EXPECT_EQ(reconstruct(scheme, g), std::vector<float>(5, g.zero));
}

TEST(Quantizer, DenormalInputs) {
  // i * 2^-140: fp32 subnormals; (hi - lo) / 3 = 2^-140 exactly.
  std::vector<float> x;
  for (int i = 0; i < 4; ++i)
    x.push_back(std::ldexp(float(i), -140));
  QuantizedGroup f32 = quantize(makeScheme(Mode::Asym, 2, ParamType::F32), x);
  EXPECT_EQ(f32.scale, std::ldexp(1.0f, -140));
  EXPECT_EQ(f32.codes, (Codes{0, 1, 2, 3}));
  EXPECT_EQ(reconstruct(makeScheme(Mode::Asym, 2, ParamType::F32), f32), x);
  // In f16 the scale underflows to 0: treated like a constant group.
  QuantScheme f16Scheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  QuantizedGroup f16 = quantize(f16Scheme, x);
  EXPECT_EQ(f16.scale, 0.0f);
  EXPECT_EQ(f16.zero, 0.0f);
  EXPECT_EQ(f16.codes, Codes(4, 0));
  // Sym: max|x| / 3 = 2^-140 again.
  QuantizedGroup sym = quantize(makeScheme(Mode::Sym, 3, ParamType::F32), x);
  EXPECT_EQ(sym.codes, (Codes{4, 5, 6, 7}));
}

TEST(Quantizer, Sym3Bit) {
  QuantScheme scheme = makeScheme(Mode::Sym, 3, ParamType::F16);
  std::vector<float> x = {-3, 1.4f, 1.5f, 0.2f, 3, -1.5f, -0.4f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 1.0f); // 3 / (2^2 - 1)
  EXPECT_EQ(g.zero, 0.0f);
  // Signed -3, 1, 2 (tie), 0, 3, -2 (tie), -0; stored + 4.
  EXPECT_EQ(g.codes, (Codes{1, 5, 6, 4, 7, 2, 4}));
  EXPECT_EQ(reconstruct(scheme, g),
            (std::vector<float>{-3, 1, 2, 0, 3, -2, 0}));
}

TEST(Quantizer, SymZeroGroup) {
  QuantScheme scheme = makeScheme(Mode::Sym, 3, ParamType::F16);
  std::vector<float> x = {0.0f, -0.0f, 0.0f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 0.0f);
  EXPECT_EQ(g.codes, Codes(3, 4));
  EXPECT_EQ(reconstruct(scheme, g), std::vector<float>(3, 0.0f));
}

TEST(Quantizer, HybridPicksAsym) {
  QuantScheme scheme = makeScheme(Mode::Hybrid, 2, ParamType::F16);
  // Sym (m = 1): s = 13, every code +1 -> SSE 14. Asym is exact.
  std::vector<float> x = {10, 11, 12, 13};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_TRUE(std::signbit(g.scale));
  EXPECT_EQ(g.scale, -1.0f);
  EXPECT_EQ(g.zero, 10.0f);
  EXPECT_EQ(g.codes, (Codes{0, 1, 2, 3}));
  EXPECT_EQ(reconstruct(scheme, g), x);
}

TEST(Quantizer, HybridPicksSym) {
  QuantScheme scheme = makeScheme(Mode::Hybrid, 2, ParamType::F16);
  // Sym s = 1 is exact; asym s = 2/3 misses 0.
  std::vector<float> x = {-1, 0, 1, 0};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_FALSE(std::signbit(g.scale));
  EXPECT_EQ(g.scale, 1.0f);
  EXPECT_EQ(g.zero, 0.0f);
  EXPECT_EQ(g.codes, (Codes{1, 2, 3, 2}));
  EXPECT_EQ(reconstruct(scheme, g), x);
}

TEST(Quantizer, HybridTieGoesToSym) {
  QuantScheme scheme = makeScheme(Mode::Hybrid, 2, ParamType::F32);
  // Both exact: sym codes -1, 1 with s = 1; asym 3 * fl(2/3) - 1 == 1.
  std::vector<float> x = {-1, 1};
  std::vector<float> asym =
      reconstruct(makeScheme(Mode::Asym, 2, ParamType::F32),
                  quantizeAsym(scheme, x.data(), 2));
  ASSERT_EQ(asym, x);
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_FALSE(std::signbit(g.scale));
  EXPECT_EQ(g.scale, 1.0f);
  EXPECT_EQ(g.codes, (Codes{1, 3}));
}

TEST(Quantizer, HybridConstantGroupKeepsNegativeZeroScale) {
  // 3-bit sym: s = f16(1/3), 3s != 1; asym constant group is exact with
  // s = 0, stored as -0 so that the sign bit still says asym.
  QuantScheme scheme = makeScheme(Mode::Hybrid, 3, ParamType::F16);
  std::vector<float> x(4, 1.0f);
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_TRUE(std::signbit(g.scale));
  EXPECT_EQ(g.scale, 0.0f);
  EXPECT_EQ(g.zero, 1.0f);
  EXPECT_EQ(reconstruct(scheme, g), x);
}

TEST(Quantizer, HybridAllZeroIsSym) {
  QuantScheme scheme = makeScheme(Mode::Hybrid, 2, ParamType::F16);
  std::vector<float> x(4, 0.0f);
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_FALSE(std::signbit(g.scale));
  EXPECT_EQ(g.codes, Codes(4, 2));
}

TEST(Quantizer, Eta1Bit) {
  QuantScheme scheme = makeScheme(Mode::Asym, 1, ParamType::F32);
  scheme.eta = 1.0 / 6.0;
  std::vector<float> x = {0, 0.2f, 0.8f, 3};
  QuantizedGroup g = quantize(scheme, x);
  // Uncalibrated s = 3, z = 0 give the codes; the stored levels become
  // eta and 1 - eta of the range: 0.5 and 2.5.
  EXPECT_EQ(g.codes, (Codes{0, 0, 0, 1}));
  EXPECT_EQ(g.zero, 0.5f);
  EXPECT_EQ(g.scale, 2.0f);
  EXPECT_EQ(reconstruct(scheme, g),
            (std::vector<float>{0.5f, 0.5f, 0.5f, 2.5f}));
}

TEST(Quantizer, Eta2Bit) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F32);
  scheme.eta = 0.045;
  std::vector<float> x = {0, 1, 2, 3};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.codes, (Codes{0, 1, 2, 3}));
  // z^ = 0 + float(0.045 * 3) * 1, s^ = float(1 - 0.09) * 1.
  EXPECT_EQ(g.zero, float(0.135));
  EXPECT_EQ(g.scale, float(0.91));
  std::vector<float> xhat = reconstruct(scheme, g);
  EXPECT_NEAR(xhat[0], 0.135f, 1e-6f);
  EXPECT_NEAR(xhat[3], 2.865f, 1e-6f);
}

TEST(Quantizer, EtaCalibratesUnroundedParams) {
  // f16: the calibration is fp32 from the unrounded s = (1.1 - 0.1) / 3 and
  // z = 0.1, each stored parameter rounded once:
  // z^ = f16(z + float(0.135) * s), s^ = f16(float(0.91) * s); codes from
  // the unrounded s and z.
  QuantScheme eta = makeScheme(Mode::Asym, 2, ParamType::F16);
  eta.eta = 0.045;
  std::vector<float> x = {0.1f, 0.4f, 0.7f, 1.1f, 0.6f};
  QuantizedGroup g = quantize(eta, x);
  float s = (1.1f - 0.1f) / 3.0f, z = 0.1f;
  Codes codes;
  for (float v : x)
    codes.push_back(uint32_t(std::nearbyint((v - z) / s)));
  EXPECT_EQ(g.codes, codes);
  float kz = float(0.045 * 3), ks = float(1 - 2 * 0.045);
  float kzs = kz * s;
  EXPECT_EQ(g.zero, storeParam(z + kzs, ParamType::F16));
  EXPECT_EQ(g.scale, storeParam(ks * s, ParamType::F16));
}

TEST(Quantizer, ZeroPointOfZerosIsPositiveZero) {
  // Whichever zero a min reduction meets first, z is stored as +0.
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  for (std::vector<float> x : {std::vector<float>{-0.0f, 0.0f, 1.0f},
                               std::vector<float>{0.0f, -0.0f, 1.0f},
                               std::vector<float>{-0.0f, -0.0f}})
    EXPECT_EQ(toF32Bits(quantize(scheme, x).zero), 0u);
  // A calibrated all-zero group keeps z^ = +0 + kz * 0 = +0 and s^ = +0.
  scheme.eta = 0.045;
  QuantizedGroup g = quantize(scheme, {-0.0f, -0.0f});
  EXPECT_EQ(toF32Bits(g.zero), 0u);
  EXPECT_EQ(toF32Bits(g.scale), 0u);
}

TEST(Quantizer, EtaZeroIsPlainAsymBitForBit) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  QuantScheme plain = makeScheme(Mode::Asym, 2, ParamType::BF16);
  QuantScheme eta = plain;
  eta.eta = 0.0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> x(32);
    for (float &v : x)
      v = uniform(rng);
    QuantizedGroup a = quantize(plain, x), b = quantize(eta, x);
    EXPECT_EQ(a.codes, b.codes);
    EXPECT_EQ(toF32Bits(a.scale), toF32Bits(b.scale));
    EXPECT_EQ(toF32Bits(a.zero), toF32Bits(b.zero));
  }
}

TEST(Quantizer, F8E4M3Saturation) {
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F8E4M3);
  std::vector<float> x = {-1000, 0, 3000};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 448.0f); // 4000 / 3 saturates
  EXPECT_EQ(g.zero, -448.0f);
  // (x + 448) / 448: -1.23 -> 0, 1, 7.7 -> 3.
  EXPECT_EQ(g.codes, (Codes{0, 1, 3}));
  EXPECT_EQ(reconstruct(scheme, g), (std::vector<float>{-448, 0, 896}));
}

TEST(Quantizer, F8E4M3CodesFromRoundedScale) {
  // 1.3 / 3 = 0.4333 -> e4m3 0.4375. 0.653 / 0.4375 = 1.49 -> 1, although
  // the unrounded scale would give 1.507 -> 2.
  QuantScheme scheme = makeScheme(Mode::Asym, 2, ParamType::F8E4M3);
  std::vector<float> x = {0, 0.653f, 1.3f};
  QuantizedGroup g = quantize(scheme, x);
  EXPECT_EQ(g.scale, 0.4375f);
  EXPECT_EQ(g.codes, (Codes{0, 1, 3}));
  QuantizedGroup f32 = quantize(makeScheme(Mode::Asym, 2, ParamType::F32), x);
  EXPECT_EQ(f32.codes, (Codes{0, 2, 3}));
}

TEST(Quantizer, AsymErrorAtMostHalfScale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int bits = 1; bits <= 8; ++bits) {
    QuantScheme scheme = makeScheme(Mode::Asym, bits, ParamType::F32);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x(32);
      for (float &v : x)
        v = normal(rng);
      QuantizedGroup g = quantize(scheme, x);
      std::vector<float> xhat = reconstruct(scheme, g);
      float amax = 0;
      for (float v : x)
        amax = std::max(amax, std::fabs(v));
      for (int i = 0; i < 32; ++i)
        ASSERT_LE(std::fabs(x[i] - xhat[i]), g.scale / 2 + 4e-7f * amax)
            << "bits=" << bits;
    }
  }
}

TEST(Quantizer, SymErrorAtMostHalfScale) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> uniform(-5.0f, 5.0f);
  for (int bits = 2; bits <= 8; ++bits) {
    QuantScheme scheme = makeScheme(Mode::Sym, bits, ParamType::F32);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x(24);
      for (float &v : x)
        v = uniform(rng);
      QuantizedGroup g = quantize(scheme, x);
      std::vector<float> xhat = reconstruct(scheme, g);
      for (int i = 0; i < 24; ++i)
        ASSERT_LE(std::fabs(x[i] - xhat[i]), g.scale / 2 + 4e-6f);
      for (uint32_t c : g.codes)
        ASSERT_GE(c, 1u) << "code 0 is unused by sym";
    }
  }
}

TEST(Quantizer, HybridNeverWorseThanEitherMode) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> uniform(-1.0f, 3.0f);
  QuantScheme scheme = makeScheme(Mode::Hybrid, 2, ParamType::F16);
  QuantScheme asymScheme = makeScheme(Mode::Asym, 2, ParamType::F16);
  QuantScheme symScheme = makeScheme(Mode::Sym, 2, ParamType::F16);
  int asymPicked = 0;
  for (int trial = 0; trial < 500; ++trial) {
    // Odd trials: small noise around zero plus two spikes, where sym's
    // zero level wins; even trials: uniform data, where asym usually wins.
    std::vector<float> x(32);
    for (float &v : x)
      v = trial % 2 ? 0.01f * uniform(rng) : uniform(rng);
    if (trial % 2) {
      x[3] = 1.0f;
      x[20] = -1.0f;
    }
    std::vector<float> h = reconstruct(scheme, quantize(scheme, x));
    std::vector<float> a = reconstruct(asymScheme, quantize(asymScheme, x));
    std::vector<float> s = reconstruct(symScheme, quantize(symScheme, x));
    double eh = squaredError(x.data(), h.data(), 32);
    EXPECT_EQ(eh, std::min(squaredError(x.data(), a.data(), 32),
                           squaredError(x.data(), s.data(), 32)));
    asymPicked += std::signbit(quantize(scheme, x).scale);
  }
  EXPECT_GT(asymPicked, 0);
  EXPECT_LT(asymPicked, 500);
}

TEST(Quantizer, Validation) {
  EXPECT_EQ(validate(QuantScheme()), "");
  EXPECT_NE(validate(makeScheme(Mode::Sym, 1, ParamType::F16)), "");
  QuantScheme levels = makeScheme(Mode::Asym, 2, ParamType::F16);
  levels.levels = 5;
  EXPECT_NE(validate(levels), "");
  QuantScheme eta = makeScheme(Mode::Sym, 2, ParamType::F16);
  eta.eta = 0.1;
  EXPECT_NE(validate(eta), "");
  QuantScheme clip = makeScheme(Mode::Asym, 2, ParamType::F16);
  clip.clip = 0.0f;
  EXPECT_NE(validate(clip), "");
}

// numerics.md: store() saturates f16 and bf16 as it does f8E4M3, and such
// groups are counted.
TEST(Quantizer, ParametersSaturateInsteadOfOverflowing) {
  EXPECT_EQ(storeParam(70000.0f, ParamType::F16), 65504.0f);
  EXPECT_EQ(storeParam(-1e6f, ParamType::F16), -65504.0f);
  EXPECT_EQ(storeParam(65510.0f, ParamType::F16), 65504.0f); // plain RNE
  EXPECT_EQ(storeParam(3.39e38f, ParamType::BF16), maxParam(ParamType::BF16));
  EXPECT_EQ(storeParam(500.0f, ParamType::F8E4M3), 448.0f);
  EXPECT_TRUE(exceedsParam(65510.0f, ParamType::F16));
  EXPECT_FALSE(exceedsParam(65504.0f, ParamType::F16));
  EXPECT_FALSE(exceedsParam(3e38f, ParamType::F32));

  // 1-bit f16, no eta: a range of 120000 cannot be stored.
  QuantizedGroup g =
      quantize(makeScheme(Mode::Asym, 1, ParamType::F16), {60000, -60000});
  EXPECT_TRUE(g.saturated);
  EXPECT_EQ(g.scale, 65504.0f);
  EXPECT_EQ(g.codes, (Codes{1, 0}));
  // Sym 2-bit f8E4M3: max |x| 1000 > 448.
  QuantizedGroup sym =
      quantize(makeScheme(Mode::Sym, 2, ParamType::F8E4M3), {1000, 1});
  EXPECT_TRUE(sym.saturated);
  EXPECT_EQ(sym.scale, 448.0f);
  EXPECT_FALSE(
      quantize(makeScheme(Mode::Asym, 2, ParamType::F16), {1, 2}).saturated);
}

// XQuant 1-bit, eta = 1/6: the calibration is fp32 from the unrounded scale
// (70000, beyond f16) and each stored parameter is rounded once, so a range
// that fits after calibration is stored finite, unsaturated.
TEST(Quantizer, EtaCalibratesBeforeRounding) {
  QuantScheme scheme = makeScheme(Mode::Asym, 1, ParamType::F16);
  scheme.eta = 1.0 / 6;
  QuantizedGroup g = quantize(scheme, {60000, -10000, 0, 30000});
  EXPECT_FALSE(g.saturated);
  float s = 70000.0f, z = -10000.0f;
  EXPECT_EQ(g.scale, storeParam(float(1.0 - 2.0 / 6) * s, ParamType::F16));
  EXPECT_EQ(g.zero, storeParam(z + float(1.0 / 6) * s, ParamType::F16));
  EXPECT_TRUE(std::isfinite(g.scale) && std::isfinite(g.zero));
  // Codes from the unrounded, uncalibrated parameters: (x - z) / s.
  EXPECT_EQ(g.codes, (Codes{1, 0, 0, 1}));
}

} // namespace
