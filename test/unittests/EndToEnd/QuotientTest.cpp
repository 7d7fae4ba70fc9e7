//===- QuotientTest.cpp - Codes at their quotients' rounding boundaries ---===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// A code is rne((x - z) / s) of a true IEEE division (docs/Numerics.md).
// An approximate quotient still gives the right code for almost every
// element. It goes wrong where the quotient lies next to a code's rounding
// boundary k + 1/2. Examples are a reciprocal multiply, or `rcp.approx` with
// no correction.
//
// The spec's model values are f32 (Specs/quotient-f32-d64.mlir), so an
// element can sit within an f32 ulp of a boundary. f16 model values cannot
// get that close. The data is built in 32 x 32 tiles of tokens and channels:
// - each group (a channel's 32 tokens or a token's 32 channels) holds the
//   tile's range ends;
// - every other element is on a boundary of the scale that range stores, or
//   1 to 3 ulps from one;
// - the tiles' ranges go from f16-subnormal scales to saturated ones.
//
// Codes and parameters must be bit-exact against the reference on the CPU
// backend and on the PTX interpreter. A quotient taken as x * (1 / s) and
// not corrected fails this test on both.
//
//===----------------------------------------------------------------------===//

#include "OneSequenceCache.h"
#include "SlicePages.h"
#include "kvq/Reference/Reference.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

constexpr unsigned kDim = 64, kLayers = 3, kTile = 32, kTokens = 257;

/// Specs/quotient-f32-d64.mlir's schemes of layer `layer`, from its text.
ref::SliceConfig sliceConfig(unsigned layer) {
  auto scheme = [](int bits, ref::Mode mode, ref::Span span,
                   ref::ParamType params) {
    ref::QuantScheme s;
    s.bits = bits;
    s.mode = mode;
    s.span = span;
    s.params = params;
    return s;
  };
  using ref::Mode, ref::Span, ref::ParamType;
  const ref::QuantScheme keys[] = {
      scheme(2, Mode::Asym, Span::Tokens, ParamType::F16),
      scheme(4, Mode::Sym, Span::Tokens, ParamType::F16),
      scheme(3, Mode::Asym, Span::Tokens, ParamType::F8E4M3)};
  const ref::QuantScheme values[] = {
      scheme(3, Mode::Asym, Span::Channels, ParamType::F16),
      scheme(3, Mode::Hybrid, Span::Channels, ParamType::F16),
      scheme(4, Mode::Sym, Span::Channels, ParamType::F8E4M3)};
  ref::SliceConfig c;
  c.headDim = kDim;
  c.key = {keys[layer], 0, 1, 128};
  c.value = {values[layer], 0, 0, 1};
  return c;
}

/// The range ends of tile `tile`: magnitudes from 2^-20 (an f16-subnormal
/// scale) to 10^6 (a saturated one).
float tileRange(unsigned tile) {
  static const float kRanges[] = {9.5367e-7f, 3.1e-3f, 0.7f,   1.0f, 13.3f,
                                  250.0f,     2.9e4f,  1.0e6f, 0.37f};
  return kRanges[tile % (sizeof(kRanges) / sizeof(kRanges[0]))];
}

/// Tokens [kTokens][kDim] for `scheme`: per tile, its range's ends in every
/// group, the other elements at or next to a rounding boundary of the scale
/// that range stores.
std::vector<float> boundaryTokens(const ref::QuantScheme &scheme,
                                  std::mt19937 &rng) {
  bool sym = scheme.mode == ref::Mode::Sym;
  std::vector<float> x(size_t(kTokens) * kDim);
  for (unsigned t = 0; t < kTokens; ++t)
    for (unsigned c = 0; c < kDim; ++c) {
      unsigned tile = t / kTile * (kDim / kTile) + c / kTile;
      float range = tileRange(tile);
      // Hybrid's groups are all >= 0, so that asym's codes, whose
      // boundaries the elements are at, are the ones it keeps.
      float low = sym                                ? -range
                  : scheme.mode == ref::Mode::Hybrid ? 0.0f
                                                     : -0.61f * range;
      float ends[2] = {low, range};
      unsigned r = (t + c) % kTile;
      if (r < 2) {
        x[t * kDim + c] = ends[r];
        continue;
      }
      ref::QuantizedGroup g = sym ? ref::quantizeSym(scheme, ends, 2)
                                  : ref::quantizeAsym(scheme, ends, 2);
      int levels = sym ? (1 << (scheme.bits - 1)) - 1 : scheme.numLevels() - 1;
      // Boundaries k + 1/2 between codes: asym 1/2 .. levels - 1/2, sym
      // -levels + 1/2 .. levels - 1/2.
      int k = sym ? int(rng() % unsigned(2 * levels)) - levels
                  : int(rng() % unsigned(levels));
      float v = g.zero + (float(k) + 0.5f) * std::fabs(g.scale);
      for (int ulps = int(rng() % 7) - 3; ulps; ulps -= ulps > 0 ? 1 : -1)
        v = std::nextafter(v, ulps > 0 ? INFINITY : -INFINITY);
      x[t * kDim + c] = std::fmin(std::fmax(v, ends[0]), ends[1]);
    }
  return x;
}

/// How many of `side`'s quantized elements have a quotient (x - z) / s
/// within 4 ulps of a rounding boundary (the codes under test).
unsigned nearBoundaries(const ref::CacheSide &side,
                        const std::vector<float> &x) {
  unsigned near = 0;
  for (int i = 0; i < side.numQuantized(); ++i)
    for (unsigned c = 0; c < kDim; ++c) {
      int g = side.groupOf(i, int(c));
      float s = std::fabs(side.scales()[g]), z = side.zeros()[g];
      if (s == 0)
        continue;
      float q = (x[size_t(i) * kDim + c] - z) / s;
      float boundary = std::floor(q) + 0.5f;
      float ulp = std::nextafter(std::fabs(q), INFINITY) - std::fabs(q);
      near += std::fabs(q - boundary) <= 4 * ulp;
    }
  return near;
}

class QuotientTest : public ::testing::TestWithParam<bool> {};

TEST_P(QuotientTest, CodesAtRoundingBoundariesMatchTheReference) {
  std::unique_ptr<Cache> cache = test::makeOneSequenceCache(
      KVQ_ARTIFACT_DIR_E2E_QUOTIENT_F32_D64, GetParam());
  ASSERT_TRUE(cache);
  SequenceId seq = *cache->addSequence();
  std::mt19937 rng(20);
  for (unsigned layer = 0; layer < kLayers; ++layer) {
    ref::SliceConfig config = sliceConfig(layer);
    std::vector<float> k = boundaryTokens(config.key.scheme, rng);
    std::vector<float> v = boundaryTokens(config.value.scheme, rng);
    ASSERT_TRUE(
        cache->append(layer, {{seq, kTokens, k.data(), v.data()}}).ok());
    ref::Slice slice(config);
    slice.append(k.data(), v.data(), int(kTokens));
    for (Tensor tensor : {Tensor::Keys, Tensor::Values}) {
      const ref::CacheSide &side =
          tensor == Tensor::Keys ? slice.keys() : slice.values();
      const std::vector<float> &x = tensor == Tensor::Keys ? k : v;
      const LayerLayout &layout =
          cache->manifest().tensor(tensor).Layers[layer];
      std::string where =
          std::string(toString(tensor)) + " of layer " + std::to_string(layer);
      ASSERT_EQ(side.numQuantized(), tensor == Tensor::Keys ? 256 : 257);
      // The data does what it is for: most codes sit at a boundary.
      EXPECT_GE(nearBoundaries(side, x),
                unsigned(side.numQuantized()) * kDim / 2)
          << where;
      unsigned bad = 0, pageTokens = cache->manifest().PageTokens;
      std::vector<uint8_t> page;
      for (int i = 0; i < side.numQuantized(); ++i) {
        unsigned pi = unsigned(i) % pageTokens;
        if (pi == 0) {
          auto bytes = cache->readSlicePage(tensor, seq, layer, 0,
                                            unsigned(i) / pageTokens);
          ASSERT_TRUE(bytes.ok()) << bytes.message();
          page = std::move(*bytes);
        }
        for (unsigned c = 0; c < kDim; ++c) {
          test::SlotMismatch slot =
              test::compareSlot(page.data(), layout, side, kDim, 0, i, pi, c);
          if ((slot.Code || slot.Scale || slot.Zero) && bad++ < 5)
            ADD_FAILURE() << where << ", token " << i << ", channel " << c
                          << ": x = " << x[size_t(i) * kDim + c]
                          << (slot.Code ? ", code differs" : "")
                          << (slot.Scale ? ", scale differs" : "")
                          << (slot.Zero ? ", zero-point differs" : "");
        }
      }
      EXPECT_EQ(bad, 0u) << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QuotientTest, ::testing::Values(false, true),
                         [](const auto &info) {
                           return info.param ? "Interpreter" : "Cpu";
                         });

} // namespace
