//===- SaturationTest.cpp - finite in, finite out ------------------------===//
//
// numerics.md section 3: rounding a parameter to its dtype saturates instead
// of overflowing, eta calibration is fp32 from the unrounded parameters, and
// saturated groups are counted. XQuant's 1-bit f16 values (eta = 1/6) with
// one token of +-60000 made the stored scale +inf (the scale was rounded to
// f16 before the calibration shrank it) and attention stayed Inf/NaN for the
// rest of the sequence. On the CPU backend and the PTX interpreter: stored
// parameters bit-exact against the reference, the saturation count equal to
// the reference's, and every later output finite.
//
//===----------------------------------------------------------------------===//

#include "XQuantTestUtil.h"

#include <cmath>
#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

constexpr unsigned kHeads = test::kXQuantHeads, kKvHeads = test::kXQuantKvHeads,
                   kDim = test::kXQuantDim;

class SaturationTest : public ::testing::TestWithParam<bool> {};

TEST_P(SaturationTest, HugeValuesStayFiniteAndAreCounted) {
  std::unique_ptr<Cache> cache = test::makeXQuantCache(GetParam());
  ASSERT_TRUE(cache);
  SequenceId seq = *cache->addSequence();
  std::vector<ref::Slice> slices(kKvHeads,
                                 ref::Slice(test::xquantSliceConfig()));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto append = [&](unsigned n, bool huge) {
    std::vector<float> k(n * kKvHeads * kDim), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
      v[i] = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
    }
    if (huge) {
      // Token 3, kv-head 1: a key of 60000; one value group spanning
      // [-60000, 60000] (calibrated scale 80000: saturates), another
      // [-10000, 60000] (unrounded scale 70000 overflowed f16 before the
      // calibration brought it to 46667: now finite and exact).
      size_t row = (3 * kKvHeads + 1) * kDim;
      k[row + 5] = 60000.0f;
      v[row + 0] = 60000.0f, v[row + 1] = -60000.0f;
      v[row + 32] = 60000.0f, v[row + 33] = -10000.0f;
      // Token 3, kv-head 0: both value groups saturate (a token's groups
      // are quantized together: each is counted).
      size_t other = 3 * kKvHeads * kDim;
      v[other + 0] = 60000.0f, v[other + 1] = -60000.0f;
      v[other + 32] = -60000.0f, v[other + 33] = 60000.0f;
    }
    ASSERT_TRUE(cache->append(0, {{seq, n, k.data(), v.data()}}).ok());
    for (unsigned h = 0; h < kKvHeads; ++h) {
      std::vector<float> kh, vh;
      for (unsigned t = 0; t < n; ++t)
        for (unsigned c = 0; c < kDim; ++c) {
          kh.push_back(k[(t * kKvHeads + h) * kDim + c]);
          vh.push_back(v[(t * kKvHeads + h) * kDim + c]);
        }
      slices[h].append(kh.data(), vh.data(), int(n));
    }
  };
  append(300, true);
  std::vector<float> q(kHeads * kDim), out;
  for (int step = 0; step < 4; ++step) {
    append(1, false);
    for (float &x : q)
      x = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
    ASSERT_TRUE(cache->attendF32(0, {seq}, q, out).ok());
    for (float x : out)
      ASSERT_TRUE(std::isfinite(x)) << "step " << step;
  }

  // Stored parameters of every quantized group, bit for bit.
  for (auto [tensor, layout] :
       {std::pair(Tensor::Keys, &cache->manifest().Keys.Layers[0].Slice),
        std::pair(Tensor::Values, &cache->manifest().Values.Layers[0].Slice)}) {
    int saturated = 0;
    for (unsigned h = 0; h < kKvHeads; ++h) {
      const ref::CacheSide &side =
          tensor == Tensor::Keys ? slices[h].keys() : slices[h].values();
      saturated += side.numSaturated();
      for (int g = 0; g < side.numGroups(); ++g) {
        auto page = cache->readSlicePage(tensor, seq, 0, h,
                                         unsigned(g) / layout->GroupsPerPage);
        ASSERT_TRUE(page.ok()) << page.message();
        uint64_t n = unsigned(g) % layout->GroupsPerPage;
        ASSERT_EQ(test::readParam16(*page, layout->ScalesOffset + 2 * n),
                  ref::toF16Bits(side.scales()[g]))
            << toString(tensor) << " scale of group " << g;
        ASSERT_EQ(test::readParam16(*page, layout->ZerosOffset + 2 * n),
                  ref::toF16Bits(side.zeros()[g]))
            << toString(tensor) << " zero of group " << g;
        ASSERT_TRUE(std::isfinite(side.scales()[g]));
      }
    }
    auto counts = cache->saturatedGroups(tensor);
    ASSERT_TRUE(counts.ok()) << counts.message();
    EXPECT_EQ(int((*counts)[0]), saturated) << toString(tensor);
    EXPECT_EQ((*counts)[1], 0u);
    // Only the value groups spanning [-60000, 60000] saturate.
    EXPECT_EQ(saturated, tensor == Tensor::Values ? 3 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SaturationTest,
                         ::testing::Values(false, true), [](const auto &info) {
                           return info.param ? "Interpreter" : "Cpu";
                         });

} // namespace
