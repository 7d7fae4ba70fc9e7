//===- SharingTest.cpp - cross-layer code sharing against the reference ---===//
//
// XQuant's sharing (numerics.md section 4): layer 1 stores only its own
// scales and zero-points, computed from its own keys and values, and
// reconstructs with layer 0's codes: x^(1) = c(0) * s^(1) + z^(1). The test
// builds that reconstruction from two reference slices (layer 0's codes,
// layer 1's parameters and full-precision rows) and checks, on the CPU
// backend and on the PTX interpreter:
//  - layer 1's stored parameters bit-exactly,
//  - its attention within max |out - ref| <= 2e-3 * max |ref| + 1e-4.
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

/// All rows of one tensor of the sharing layer as the cache reconstructs
/// them: full-precision rows of `own`, quantized rows from `owner`'s codes
/// with `own`'s parameters.
std::vector<double> sharedRows(const ref::CacheSide &owner,
                               const ref::CacheSide &own) {
  std::vector<double> rows;
  for (float x : own.sinkRows())
    rows.push_back(x);
  for (int i = 0; i < own.numQuantized(); ++i)
    for (unsigned c = 0; c < kDim; ++c) {
      int g = own.groupOf(i, int(c));
      rows.push_back(ref::dequantize(own.scheme(), owner.codes()[i * kDim + c],
                                     own.scales()[g], own.zeros()[g]));
    }
  for (float x : own.windowRows())
    rows.push_back(x);
  return rows;
}

/// fp64 decode attention of query head `hq` over rows [T][D].
std::vector<double> attend(const float *q, const std::vector<double> &k,
                           const std::vector<double> &v) {
  size_t tokens = k.size() / kDim;
  std::vector<double> scores(tokens), out(kDim, 0.0);
  double maxScore = -INFINITY, sum = 0;
  for (size_t t = 0; t < tokens; ++t) {
    double dot = 0;
    for (unsigned c = 0; c < kDim; ++c)
      dot += double(q[c]) * k[t * kDim + c];
    scores[t] = dot / std::sqrt(double(kDim));
    maxScore = std::max(maxScore, scores[t]);
  }
  for (double &s : scores)
    sum += s = std::exp(s - maxScore);
  for (size_t t = 0; t < tokens; ++t)
    for (unsigned c = 0; c < kDim; ++c)
      out[c] += scores[t] / sum * v[t * kDim + c];
  return out;
}

class SharingTest : public ::testing::TestWithParam<bool> {};

TEST_P(SharingTest, SharingLayerMatchesTheReference) {
  std::unique_ptr<Cache> cache = test::makeXQuantCache(GetParam());
  ASSERT_TRUE(cache);
  SequenceId seq = *cache->addSequence();

  // Per layer and kv-head reference slices fed the same tokens.
  std::vector<ref::Slice> slices;
  for (unsigned i = 0; i < 2 * kKvHeads; ++i)
    slices.emplace_back(test::xquantSliceConfig());
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto appendBoth = [&](unsigned n) {
    for (unsigned layer = 0; layer < 2; ++layer) {
      std::vector<float> k(n * kKvHeads * kDim), v(k.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
        v[i] = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
      }
      ASSERT_TRUE(cache->append(layer, {{seq, n, k.data(), v.data()}}).ok());
      for (unsigned h = 0; h < kKvHeads; ++h) {
        std::vector<float> kh, vh;
        for (unsigned t = 0; t < n; ++t)
          for (unsigned c = 0; c < kDim; ++c) {
            kh.push_back(k[(t * kKvHeads + h) * kDim + c]);
            vh.push_back(v[(t * kKvHeads + h) * kDim + c]);
          }
        slices[layer * kKvHeads + h].append(kh.data(), vh.data(), int(n));
      }
    }
  };
  // 300 tokens: two key flushes of 128, 171 quantized values; then decode.
  appendBoth(300);
  for (int step = 0; step < 3; ++step)
    appendBoth(1);

  const kvq::abi::SliceLayout &keys = cache->manifest().Keys.Layers[1].Slice;
  const kvq::abi::SliceLayout &values =
      cache->manifest().Values.Layers[1].Slice;
  for (unsigned h = 0; h < kKvHeads; ++h) {
    const ref::Slice &own = slices[kKvHeads + h];
    for (auto [tensor, side, layout] :
         {std::make_tuple(Tensor::Keys, &own.keys(), &keys),
          std::make_tuple(Tensor::Values, &own.values(), &values)}) {
      unsigned pages = *cache->numPages(tensor, seq);
      for (int g = 0; g < side->numGroups(); ++g) {
        unsigned perPage = layout->GroupsPerPage;
        if (unsigned(g) / perPage >= pages)
          break;
        auto page = cache->readSlicePage(tensor, seq, 1, h, g / perPage);
        ASSERT_TRUE(page.ok()) << page.message();
        uint64_t n = g % perPage;
        ASSERT_EQ(test::readParam16(*page, layout->ScalesOffset + 2 * n),
                  ref::toF16Bits(side->scales()[g]))
            << toString(tensor) << " scale of group " << g;
        ASSERT_EQ(test::readParam16(*page, layout->ZerosOffset + 2 * n),
                  ref::toF16Bits(side->zeros()[g]))
            << toString(tensor) << " zero of group " << g;
      }
    }
  }

  std::vector<float> q(kHeads * kDim);
  for (float &x : q)
    x = ref::fromF16Bits(ref::toF16Bits(normal(rng)));
  std::vector<float> out;
  ASSERT_TRUE(cache->attendF32(1, {seq}, q, out).ok());
  double maxRef = 0, maxErr = 0;
  for (unsigned hq = 0; hq < kHeads; ++hq) {
    unsigned h = hq / (kHeads / kKvHeads);
    const ref::Slice &owner = slices[h], &own = slices[kKvHeads + h];
    std::vector<double> expected =
        attend(&q[hq * kDim], sharedRows(owner.keys(), own.keys()),
               sharedRows(owner.values(), own.values()));
    for (unsigned c = 0; c < kDim; ++c) {
      maxRef = std::max(maxRef, std::fabs(expected[c]));
      maxErr = std::max(maxErr, std::fabs(out[hq * kDim + c] - expected[c]));
    }
  }
  EXPECT_LE(maxErr, 2e-3 * maxRef + 1e-4);
}

/// The observable state of layer 1 of `seq`: region counts, windows and the
/// bytes of every page slice.
std::vector<uint8_t> sharingLayerState(Cache &cache, SequenceId seq) {
  std::vector<uint8_t> state;
  auto counts = cache.counts(seq, 1);
  EXPECT_TRUE(counts.ok());
  for (Tensor t : {Tensor::Keys, Tensor::Values}) {
    for (unsigned n :
         {(*counts)[t].Sink, (*counts)[t].Quantized, (*counts)[t].Window})
      state.insert(state.end(), reinterpret_cast<uint8_t *>(&n),
                   reinterpret_cast<uint8_t *>(&n) + sizeof n);
    auto window = cache.readWindow(t, seq, 1);
    EXPECT_TRUE(window.ok());
    state.insert(state.end(), window->begin(), window->end());
    for (unsigned p = 0; p < *cache.numPages(t, seq); ++p)
      for (unsigned h = 0; h < kKvHeads; ++h) {
        auto page = cache.readSlicePage(t, seq, 1, h, p);
        state.insert(state.end(), page->begin(), page->end());
      }
  }
  return state;
}

// Layer 1 reads layer 0's codes: appending it past layer 0 would make its
// kernels read codes nobody wrote (attention from zero codes had a relative
// error of 1.39). The runtime refuses, and the cache is left unchanged.
TEST(SharingOrderTest, SharingLayerMayNotPassItsOwner) {
  auto artifact = Artifact::open(KVQ_ARTIFACT_DIR_E2E_XQUANT_D64_GQA4);
  ASSERT_TRUE(artifact.ok()) << artifact.message();
  auto created = Cache::create(*artifact, CacheOptions());
  ASSERT_TRUE(created.ok()) << created.message();
  Cache &cache = **created;
  SequenceId seq = *cache.addSequence();
  std::vector<float> k(300 * kKvHeads * kDim, 0.25f), v(k.size(), -0.5f);
  auto appendLayer = [&](unsigned layer, unsigned n) {
    return cache.append(layer, {{seq, n, k.data(), v.data()}});
  };

  std::vector<uint8_t> before = sharingLayerState(cache, seq);
  Status first = appendLayer(1, 300);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(first.message().find("append layer 0 first"), std::string::npos)
      << first.message();
  EXPECT_EQ(sharingLayerState(cache, seq), before);

  ASSERT_TRUE(appendLayer(0, 300).ok());
  ASSERT_TRUE(appendLayer(1, 200).ok());
  ASSERT_TRUE(appendLayer(1, 100).ok());
  // A decode step: the sharing layer before its owner is refused.
  before = sharingLayerState(cache, seq);
  EXPECT_FALSE(appendLayer(1, 1).ok());
  EXPECT_EQ(sharingLayerState(cache, seq), before);
  ASSERT_TRUE(appendLayer(0, 1).ok());
  EXPECT_TRUE(appendLayer(1, 1).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, SharingTest, ::testing::Values(false, true),
                         [](const auto &info) {
                           return info.param ? "Interpreter" : "Cpu";
                         });

} // namespace
