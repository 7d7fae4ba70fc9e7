//===- ReorderTest.cpp - Channel reorder and clip tables vs reference -----===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// test/unittests/Runtime/Specs/skvq-reorder-d64.mlir (SKVQ channel reorder
// with variable group sizes, per-group clip tables; two layers per scheme,
// sharing kernels) on the CPU backend and on the PTX interpreter, against
// kvq::ref slices configured from the same table formulas: every code, scale
// and zero-point bit-exact (decoded from the page bytes with the layout of
// docs/KernelABI.md, "Channel reorder"), and decode attention within
// max |out - ref| <= 2e-3 * max |ref| + 1e-4.
//
//===----------------------------------------------------------------------===//

#include "OneSequenceCache.h"
#include "SlicePages.h"
#include "kvq/Reference/Reference.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

constexpr int kLayers = 4, kHeads = 4, kKvHeads = 2, kDim = 64, kGroup = 16;
constexpr unsigned kPageTokens = 32;

// The spec's tables (see its header).
int permAt(int l, int h, int i) {
  return (i * (5 + 2 * (2 * l + h)) + 7 * l + 3 * h) % kDim;
}
// Layers 0 and 1 share their kernels: their sizes take as many words a
// token (keys 5, values 8).
const int kKeySizes[2][2][4] = {{{10, 22, 16, 16}, {16, 16, 4, 28}},
                                {{16, 16, 20, 12}, {16, 16, 16, 16}}};
const int kValueSizes[2][2][4] = {{{13, 19, 16, 16}, {5, 27, 16, 16}},
                                  {{16, 16, 16, 16}, {30, 2, 16, 16}}};

ref::QuantScheme scheme(int bits, ref::Span span, ref::ParamType params,
                        float clip) {
  ref::QuantScheme s;
  s.bits = bits;
  s.mode = ref::Mode::Asym;
  s.span = span;
  s.groupSize = kGroup;
  s.params = params;
  s.clip = clip;
  return s;
}

void setReorder(ref::SideConfig &side, int l, int h, const int (&sizes)[4]) {
  for (int i = 0; i < kDim; ++i)
    side.perm.push_back(permAt(l, h, i));
  side.groupSizes.assign(sizes, sizes + 4);
}

/// The reference configuration of (layer l, kv-head h), from the spec text.
ref::SliceConfig referenceConfig(int l, int h) {
  ref::SliceConfig c;
  c.headDim = kDim;
  c.key = {scheme(2, ref::Span::Channels, ref::ParamType::F8E4M3, 1.0f), 3, 8,
           1};
  for (int g = 0; g < 4; ++g)
    c.key.groupClips.push_back(0.5f + float((g + 4 * h + 8 * l) % 16) / 32);
  if (l < 2) {
    c.keyNorm = true;
    setReorder(c.key, l, h, kKeySizes[l][h]);
    c.value = {scheme(3, ref::Span::Channels, ref::ParamType::F16, 0.875f), 3,
               8, 16};
    setReorder(c.value, l, h, kValueSizes[l][h]);
  } else {
    c.value = {scheme(2, ref::Span::Tokens, ref::ParamType::F16, 1.0f), 3, 8,
               16};
    for (int ch = 0; ch < kDim; ++ch)
      c.value.groupClips.push_back(0.5f + float((ch + h + l) % 16) / 32);
  }
  return c;
}

/// The word offset of each group of a reordered token, and the words of one
/// token: every group starts on a word, and all kv-heads of a layer take
/// the most any of them needs.
struct ReorderWords {
  std::vector<std::vector<unsigned>> groupWord;
  unsigned perToken = 0;
};
ReorderWords reorderWords(const int (&sizes)[2][4], unsigned bits) {
  ReorderWords words;
  for (const int(&head)[4] : sizes) {
    unsigned word = 0;
    words.groupWord.emplace_back();
    for (int size : head) {
      words.groupWord.back().push_back(word);
      word += (unsigned(size) * bits + 31) / 32;
    }
    words.perToken = std::max(words.perToken, word);
  }
  return words;
}

class ReorderTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    cache = test::makeOneSequenceCache(KVQ_ARTIFACT_DIR_E2E_SKVQ_REORDER_D64,
                                       GetParam());
    ASSERT_TRUE(cache);
    seq = *cache->addSequence();
    for (int l = 0; l < kLayers; ++l)
      for (int h = 0; h < kKvHeads; ++h)
        slices.emplace_back(referenceConfig(l, h));
  }

  /// f16-representable N(0, 1) values; keys get outlier channels.
  std::vector<float> random(size_t n, bool keys) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) {
      float v = normal(rng);
      if (keys && i % kDim % 16 == 3)
        v = 20.0f + v;
      x[i] = ref::fromF16Bits(ref::toF16Bits(v));
    }
    return x;
  }

  void append(unsigned n) {
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> k = random(size_t(n) * kKvHeads * kDim, true);
      std::vector<float> v = random(k.size(), false);
      Status s = cache->append(unsigned(l), {{seq, n, k.data(), v.data()}});
      ASSERT_TRUE(s.ok()) << s.message();
      for (int h = 0; h < kKvHeads; ++h) {
        std::vector<float> kh, vh;
        for (unsigned t = 0; t < n; ++t) {
          size_t row = (size_t(t) * kKvHeads + h) * kDim;
          kh.insert(kh.end(), &k[row], &k[row] + kDim);
          vh.insert(vh.end(), &v[row], &v[row] + kDim);
        }
        slices[l * kKvHeads + h].append(kh.data(), vh.data(), int(n));
      }
    }
  }

  /// Code of (page token pi, channel ch) of a slice page, and its group
  /// index in the page.
  std::pair<uint32_t, unsigned> codeAt(const std::vector<uint8_t> &page,
                                       const LayerLayout &layout,
                                       const ref::CacheSide &side, int l, int h,
                                       bool keys, unsigned pi, int ch) {
    unsigned bits = layout.Scheme.Bits;
    if (layout.Scheme.SpanTokens) {
      unsigned n = (pi / kGroup) * kDim + unsigned(ch);
      uint64_t bit =
          uint64_t(n) * layout.Slice.WordsPerGroup * 32 + (pi % kGroup) * bits;
      return {test::extractBits(page.data(), bit, bits), n};
    }
    if (side.config().perm.empty()) {
      unsigned n = pi * (kDim / kGroup) + unsigned(ch) / kGroup;
      uint64_t bit = uint64_t(n) * layout.Slice.WordsPerGroup * 32 +
                     (unsigned(ch) % kGroup) * bits;
      return {test::extractBits(page.data(), bit, bits), n};
    }
    ReorderWords words =
        reorderWords(keys ? kKeySizes[l] : kValueSizes[l], bits);
    int position = 0;
    while (side.channelAt(position) != ch)
      ++position;
    int g = 0;
    while (side.groupStart(g) + side.groupSize(g) <= position)
      ++g;
    uint64_t bit =
        (uint64_t(pi) * words.perToken + words.groupWord[h][g]) * 32 +
        uint64_t(position - side.groupStart(g)) * bits;
    return {test::extractBits(page.data(), bit, bits), pi * 4 + unsigned(g)};
  }

  void checkCodes() {
    for (int l = 0; l < kLayers; ++l)
      for (Tensor t : {Tensor::Keys, Tensor::Values})
        for (int h = 0; h < kKvHeads; ++h)
          checkSlice(l, h, t);
    // Layers 0 and 1's key norms, which their reordered groups are
    // quantized after.
    for (int l = 0; l < 2; ++l) {
      Expected<std::vector<float>> norms =
          cache->readKeyNorms(seq, unsigned(l));
      ASSERT_TRUE(norms.ok()) << norms.message();
      for (int h = 0; h < kKvHeads; ++h) {
        const std::vector<float> &want = slices[l * kKvHeads + h].keyNorms();
        ASSERT_EQ(want.size(), size_t(kDim));
        EXPECT_TRUE(std::equal(want.begin(), want.end(),
                               norms->begin() + size_t(h) * kDim))
            << "key norms of layer " << l << " kv-head " << h;
      }
    }
  }

  void checkSlice(int l, int h, Tensor t) {
    bool keys = t == Tensor::Keys;
    const ref::Slice &slice = slices[l * kKvHeads + h];
    const ref::CacheSide &side = keys ? slice.keys() : slice.values();
    const LayerLayout &layout = cache->manifest().tensor(t).Layers[l];
    const kvq::abi::SliceLayout &numbers = layout.Slice;
    Expected<SliceCounts> counts = cache->counts(seq, unsigned(l));
    ASSERT_TRUE(counts.ok());
    ASSERT_EQ((*counts)[t].Quantized, unsigned(side.numQuantized()));
    unsigned mismatches = 0;
    std::vector<uint8_t> page;
    for (int i = 0; i < side.numQuantized(); ++i) {
      unsigned pi = unsigned(i) % kPageTokens;
      if (pi == 0 || page.empty())
        page = *cache->readSlicePage(t, seq, unsigned(l), unsigned(h),
                                     unsigned(i) / kPageTokens);
      for (int ch = 0; ch < kDim; ++ch) {
        auto [code, n] = codeAt(page, layout, side, l, h, keys, pi, ch);
        int group = side.groupOf(i, ch);
        uint32_t scale = 0, zero = 0;
        std::memcpy(&scale,
                    &page[numbers.ScalesOffset + n * numbers.ParamBytes],
                    numbers.ParamBytes);
        std::memcpy(&zero, &page[numbers.ZerosOffset + n * numbers.ParamBytes],
                    numbers.ParamBytes);
        ref::ParamType params = side.scheme().params;
        bool same = code == side.codes()[size_t(i) * kDim + ch] &&
                    scale == ref::toParamBits(side.scales()[group], params) &&
                    zero == ref::toParamBits(side.zeros()[group], params);
        if (!same && mismatches++ < 3)
          ADD_FAILURE() << toString(t) << " layer " << l << " kv-head " << h
                        << " token " << i << " channel " << ch
                        << ": code or parameters differ from the reference";
      }
    }
    EXPECT_EQ(mismatches, 0u)
        << toString(t) << " layer " << l << " kv-head " << h;
  }

  void checkAttention() {
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> q = random(size_t(kHeads) * kDim, false), out;
      Status s = cache->attendF32(unsigned(l), {seq}, q, out);
      ASSERT_TRUE(s.ok()) << s.message();
      const int ratio = kHeads / kKvHeads;
      std::vector<double> want(q.size());
      for (int h = 0; h < kKvHeads; ++h)
        slices[l * kKvHeads + h].attend(&q[size_t(h) * ratio * kDim], ratio,
                                        1.0 / std::sqrt(double(kDim)),
                                        &want[size_t(h) * ratio * kDim]);
      double maxRef = 0, maxErr = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        maxRef = std::max(maxRef, std::fabs(want[i]));
        maxErr = std::max(maxErr, std::fabs(double(out[i]) - want[i]));
      }
      EXPECT_LE(maxErr, 2e-3 * maxRef + 1e-4)
          << "layer " << l << " after " << slices[0].numTokens() << " tokens";
    }
  }

  std::unique_ptr<Cache> cache;
  SequenceId seq = 0;
  std::vector<ref::Slice> slices;
  std::mt19937 rng{11};
};

TEST_P(ReorderTest, CodesAndAttentionMatchTheReference) {
  append(70);
  checkCodes();
  checkAttention();
  for (int step = 0; step < 24; ++step)
    append(1);
  checkCodes();
  checkAttention();
}

TEST_P(ReorderTest, ManifestRecordsTheLayoutAndTables) {
  const Manifest &m = cache->manifest();
  // Keys: 2-bit groups of 10, 22, 16, 16 take 1 + 2 + 1 + 1 words (5, not
  // the 4 of fixed groups); values: 3-bit 13, 19, 16, 16 take 2 each.
  EXPECT_EQ(m.tensor(Tensor::Keys).Layers[0].Slice.CodesBytes,
            kPageTokens * 5 * 4);
  EXPECT_EQ(m.tensor(Tensor::Keys).Layers[2].Slice.CodesBytes,
            kPageTokens * 4 * 4);
  EXPECT_EQ(m.tensor(Tensor::Values).Layers[0].Slice.CodesBytes,
            kPageTokens * 8 * 4);
  // Each pair of layers shares its kernels, and a launch picks its layer's
  // table rows.
  for (int l = 0; l < kLayers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    int first = l / 2 * 2;
    unsigned row = unsigned(l % 2);
    EXPECT_EQ(m.Layers[l].Attend, m.Layers[first].Attend);
    EXPECT_EQ(m.Layers[l].AttendTableRow, row);
    for (Tensor t : {Tensor::Keys, Tensor::Values}) {
      const std::vector<LayerLayout> &layers = m.tensor(t).Layers;
      EXPECT_EQ(layers[l].FlushKernel, layers[first].FlushKernel);
      EXPECT_EQ(layers[l].FlushTableRow, row);
    }
  }
  EXPECT_NE(m.Layers[0].Attend, m.Layers[2].Attend);
  EXPECT_EQ(m.Kernels.size(), 7u); // 2 x (2 flushes + attend) + key norms
  // The manifest's tables are the spec's, and its group words the ones the
  // codes are decoded with here.
  for (int l = 0; l < kLayers; ++l)
    for (Tensor t : {Tensor::Keys, Tensor::Values}) {
      SCOPED_TRACE(std::string(toString(t)) + " layer " + std::to_string(l));
      const SchemeLayout &s = m.tensor(t).Layers[l].Scheme;
      const kvq::abi::SliceLayout &slice = m.tensor(t).Layers[l].Slice;
      for (int h = 0; h < kKvHeads; ++h) {
        ref::SliceConfig config = referenceConfig(l, h);
        const ref::SideConfig &side =
            t == Tensor::Keys ? config.key : config.value;
        if (side.perm.empty()) {
          EXPECT_TRUE(s.Perm.empty() && slice.GroupWords.empty());
        } else {
          ReorderWords words = reorderWords(
              t == Tensor::Keys ? kKeySizes[l] : kValueSizes[l], s.Bits);
          EXPECT_EQ(slice.WordsPerToken, words.perToken);
          ASSERT_EQ(s.Perm.size(), size_t(kKvHeads));
          ASSERT_EQ(slice.GroupsPerToken, 4u);
          EXPECT_EQ(
              std::vector<unsigned>(slice.GroupWords.begin() + h * 4,
                                    slice.GroupWords.begin() + (h + 1) * 4),
              words.groupWord[h]);
          EXPECT_EQ(std::vector<int>(s.Perm[h].begin(), s.Perm[h].end()),
                    side.perm);
          EXPECT_EQ(
              std::vector<int>(s.GroupSizes[h].begin(), s.GroupSizes[h].end()),
              side.groupSizes);
        }
        ASSERT_EQ(s.ClipTable.empty(), side.groupClips.empty());
        if (!side.groupClips.empty()) {
          EXPECT_EQ(
              std::vector<float>(s.ClipTable[h].begin(), s.ClipTable[h].end()),
              side.groupClips);
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, ReorderTest, ::testing::Bool(),
                         [](const auto &info) {
                           return info.param ? "Interpreter" : "Cpu";
                         });

} // namespace
