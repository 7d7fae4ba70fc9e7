//===- SliceTest.cpp - Cache slice simulator --------------------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// The flush rule, the append-splitting property of numerics.md section 1 for
// KIVI-2 and InnerQ, key normalisation, group formation recomputed from the
// raw rows, and decode attention.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Slice.h"
#include "kvq/Reference/Packing.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

using namespace kvq::ref;

namespace {

constexpr int kHeadDim = 64;

QuantScheme scheme(Mode mode, int bits, Span span, int groupSize) {
  QuantScheme s;
  s.mode = mode;
  s.bits = bits;
  s.span = span;
  s.groupSize = groupSize;
  s.params = ParamType::F16;
  return s;
}

/// KIVI-2 with R = 128 mapped to the flush rule (numerics.md section 1).
SliceConfig kivi2(int headDim = kHeadDim) {
  SliceConfig c;
  c.headDim = headDim;
  c.key = {scheme(Mode::Asym, 2, Span::Tokens, 32), 0, 1, 128};
  c.value = {scheme(Mode::Asym, 2, Span::Channels, 32), 0, 129, 1};
  return c;
}

SliceConfig innerQBase(int headDim = kHeadDim) {
  SliceConfig c;
  c.headDim = headDim;
  c.key = {scheme(Mode::Sym, 3, Span::Channels, 32), 32, 96, 1};
  c.value = {scheme(Mode::Sym, 3, Span::Tokens, 32), 32, 96, 32};
  c.keyNorm = true;
  return c;
}

SliceConfig innerQHybrid(int headDim = kHeadDim) {
  SliceConfig c = innerQBase(headDim);
  c.value.scheme = scheme(Mode::Hybrid, 2, Span::Tokens, 32);
  return c;
}

/// n x d model values (f16-representable), by default with a few outlier
/// channels as real keys have.
std::vector<float> randomRows(std::mt19937 &rng, int n, int d,
                              bool outliers = true) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(size_t(n) * d);
  for (size_t i = 0; i < rows.size(); ++i) {
    float channelScale = outliers && (i % d) % 13 == 5 ? 12.0f : 1.0f;
    rows[i] = storeParam(channelScale * normal(rng), ParamType::F16);
  }
  return rows;
}

std::vector<uint32_t> bitsOf(const std::vector<float> &v) {
  std::vector<uint32_t> bits;
  for (float x : v)
    bits.push_back(toF32Bits(x));
  return bits;
}

void expectSameSide(const CacheSide &a, const CacheSide &b) {
  EXPECT_EQ(a.numSink(), b.numSink());
  EXPECT_EQ(a.numQuantized(), b.numQuantized());
  EXPECT_EQ(a.numWindow(), b.numWindow());
  EXPECT_EQ(bitsOf(a.sinkRows()), bitsOf(b.sinkRows()));
  EXPECT_EQ(bitsOf(a.windowRows()), bitsOf(b.windowRows()));
  EXPECT_EQ(a.codes(), b.codes());
  EXPECT_EQ(bitsOf(a.scales()), bitsOf(b.scales()));
  EXPECT_EQ(bitsOf(a.zeros()), bitsOf(b.zeros()));
  EXPECT_EQ(bitsOf(a.norms()), bitsOf(b.norms()));
  EXPECT_EQ(a.packedCodes(), b.packedCodes());
}

void expectSameSlice(const Slice &a, const Slice &b) {
  ASSERT_EQ(a.numTokens(), b.numTokens());
  expectSameSide(a.keys(), b.keys());
  expectSameSide(a.values(), b.values());
}

/// Appends rows [begin, end) of k and v in chunks of the given sizes
/// (cycled); chunk size 0 means everything at once.
void appendChunked(Slice &slice, const std::vector<float> &k,
                   const std::vector<float> &v, int begin, int end,
                   const std::vector<int> &chunks) {
  const int d = slice.config().headDim;
  int t = begin;
  for (size_t i = 0; t < end; ++i) {
    int chunk = chunks[i % chunks.size()];
    int n = chunk == 0 ? end - t : std::min(chunk, end - t);
    slice.append(k.data() + size_t(t) * d, v.data() + size_t(t) * d, n);
    t += n;
  }
}

//===----------------------------------------------------------------------===//
// Flush rule
//===----------------------------------------------------------------------===//

void checkWindowBounds(const CacheSide &side) {
  const SideConfig &c = side.config();
  int t = side.numTokens();
  EXPECT_EQ(side.numSink(), std::min(t, c.sink));
  EXPECT_EQ(side.numQuantized() % c.flushUnit, 0);
  EXPECT_LT(side.numWindow(), c.window + c.flushUnit);
  if (t - c.sink >= c.window)
    EXPECT_GE(side.numWindow(), c.window);
  else
    EXPECT_EQ(side.numQuantized(), 0);
}

TEST(Slice, WindowStaysWithinFlushBounds) {
  std::mt19937 rng(1);
  std::vector<SliceConfig> configs = {kivi2(), innerQBase(), innerQHybrid()};
  SliceConfig odd = kivi2(32);
  odd.key = {scheme(Mode::Asym, 2, Span::Tokens, 8), 5, 7, 24};
  odd.value = {scheme(Mode::Asym, 3, Span::Channels, 16), 0, 0, 3};
  configs.push_back(odd);
  for (const SliceConfig &config : configs) {
    Slice slice(config);
    std::uniform_int_distribution<int> size(0, 70);
    for (int step = 0; step < 60; ++step) {
      int n = size(rng);
      std::vector<float> k = randomRows(rng, n, config.headDim);
      std::vector<float> v = randomRows(rng, n, config.headDim);
      slice.append(k.data(), v.data(), n);
      checkWindowBounds(slice.keys());
      checkWindowBounds(slice.values());
    }
  }
}

/// KIVI's own rule, attend-before-flush: after a prefill of P tokens it
/// keeps P mod R key tokens and the last R value tokens in fp16; at each
/// decode step the new token joins the fp16 tail, attention runs, then keys
/// flush the whole tail once it reaches R and values flush their oldest
/// token once they hold more than R.
struct KiviModel {
  int r;
  int keyTail;
  int valueTail;
  KiviModel(int r, int prefill)
      : r(r), keyTail(prefill % r), valueTail(std::min(prefill, r)) {}
  /// Returns the fp16 (keys, values) that the decode step attends.
  std::pair<int, int> decodeStep() {
    ++keyTail;
    ++valueTail;
    std::pair<int, int> attended(keyTail, valueTail);
    if (keyTail == r)
      keyTail = 0;
    if (valueTail > r)
      valueTail = r;
    return attended;
  }
};

TEST(Slice, KiviMappingSeesKivisFp16Tokens) {
  std::mt19937 rng(2);
  for (int prefill : {1, 5, 100, 127, 128, 129, 255, 256, 300}) {
    Slice slice(kivi2());
    KiviModel kivi(128, prefill);
    std::vector<float> k = randomRows(rng, prefill + 300, kHeadDim);
    std::vector<float> v = randomRows(rng, prefill + 300, kHeadDim);
    slice.append(k.data(), v.data(), prefill);
    for (int step = 0; step < 300; ++step) {
      size_t offset = size_t(prefill + step) * kHeadDim;
      slice.append(k.data() + offset, v.data() + offset, 1);
      std::pair<int, int> expected = kivi.decodeStep();
      ASSERT_EQ(slice.keys().numWindow(), expected.first)
          << "prefill " << prefill << " step " << step;
      ASSERT_EQ(slice.values().numWindow(), expected.second)
          << "prefill " << prefill << " step " << step;
    }
  }
}

TEST(Slice, KiviPrefillState) {
  // After the prefill append itself, the mapped rule holds
  // ((T - 1) mod R) + 1 keys: KIVI's T mod R plus the one that its first
  // decode step adds before attending, except that KIVI's 0 means R here.
  std::mt19937 rng(3);
  for (int t : {1, 127, 128, 129, 1000}) {
    Slice slice(kivi2());
    std::vector<float> k = randomRows(rng, t, kHeadDim);
    slice.append(k.data(), k.data(), t);
    EXPECT_EQ(slice.keys().numWindow(), (t - 1) % 128 + 1);
    EXPECT_EQ(slice.values().numWindow(), std::min(t, 129));
  }
}

//===----------------------------------------------------------------------===//
// Appending n tokens at once equals appending them one at a time.
//===----------------------------------------------------------------------===//

TEST(Slice, Kivi2SplitAppendsAgree) {
  std::mt19937 rng(4);
  const int total = 700;
  std::vector<float> k = randomRows(rng, total, kHeadDim);
  std::vector<float> v = randomRows(rng, total, kHeadDim);
  Slice whole(kivi2()), single(kivi2()), chunked(kivi2());
  appendChunked(whole, k, v, 0, total, {0});
  appendChunked(single, k, v, 0, total, {1});
  appendChunked(chunked, k, v, 0, total, {3, 130, 1, 64, 200});
  ASSERT_GT(whole.keys().numQuantized(), 0);
  ASSERT_GT(whole.values().numQuantized(), 0);
  expectSameSlice(whole, single);
  expectSameSlice(whole, chunked);
}

void checkPromptThenSplitAppends(const SliceConfig &config, int prompt) {
  std::mt19937 rng(5 + prompt);
  const int total = prompt + 400;
  std::vector<float> k = randomRows(rng, total, config.headDim);
  std::vector<float> v = randomRows(rng, total, config.headDim);
  Slice whole(config), single(config), chunked(config);
  for (Slice *s : {&whole, &single, &chunked})
    s->append(k.data(), v.data(), prompt);
  appendChunked(whole, k, v, prompt, total, {0});
  appendChunked(single, k, v, prompt, total, {1});
  appendChunked(chunked, k, v, prompt, total, {7, 33, 1, 90});
  ASSERT_GT(whole.keys().numQuantized(), 0);
  ASSERT_GT(whole.values().numQuantized(), 0);
  expectSameSlice(whole, single);
  expectSameSlice(whole, chunked);
}

TEST(Slice, InnerQBaseSplitAppendsAgree) {
  for (int prompt : {1, 20, 200})
    checkPromptThenSplitAppends(innerQBase(), prompt);
}

TEST(Slice, InnerQHybridSplitAppendsAgree) {
  for (int prompt : {1, 20, 200})
    checkPromptThenSplitAppends(innerQHybrid(), prompt);
}

//===----------------------------------------------------------------------===//
// Contents: sink, window, groups, norms
//===----------------------------------------------------------------------===//

TEST(Slice, FullPrecisionRowsAreStoredAsGiven) {
  std::mt19937 rng(6);
  const int total = 500;
  std::vector<float> k = randomRows(rng, total, kHeadDim);
  std::vector<float> v = randomRows(rng, total, kHeadDim);
  Slice slice(innerQBase());
  appendChunked(slice, k, v, 0, total, {37});
  const int d = kHeadDim;
  std::vector<float> kHat = slice.dequantizedKeys();
  std::vector<float> vHat = slice.dequantizedValues();
  ASSERT_EQ(int(kHat.size()), total * d);
  for (int t = 0; t < total; ++t) {
    for (const CacheSide *side : {&slice.keys(), &slice.values()}) {
      if (side->regionOf(t) == Region::Quantized)
        continue;
      const std::vector<float> &in = side == &slice.keys() ? k : v;
      const std::vector<float> &out = side == &slice.keys() ? kHat : vHat;
      for (int c = 0; c < d; ++c)
        ASSERT_EQ(toF32Bits(out[size_t(t) * d + c]),
                  toF32Bits(in[size_t(t) * d + c]));
    }
  }
  EXPECT_EQ(slice.keys().regionOf(0), Region::Sink);
  EXPECT_EQ(slice.keys().regionOf(31), Region::Sink);
  EXPECT_EQ(slice.keys().regionOf(32), Region::Quantized);
  EXPECT_EQ(slice.keys().regionOf(total - 1), Region::Window);
  EXPECT_EQ(slice.keys().numWindow(), 96);
  EXPECT_EQ(slice.values().numWindow(), 96 + (total - 32 - 96) % 32);
}

/// Recomputes every group of a side from the raw rows with quantizeGroup and
/// compares codes and stored parameters bit for bit.
void checkGroupsFromRawRows(const CacheSide &side,
                            const std::vector<float> &raw) {
  const int d = side.headDim();
  const int g = side.scheme().groupSize;
  const int first = side.numSink();
  const std::vector<float> &norms = side.norms();
  auto input = [&](int quantizedToken, int c) {
    float x = raw[size_t(first + quantizedToken) * d + c];
    return norms.empty() ? x : x / norms[c];
  };
  std::vector<int> seen(side.numGroups(), 0);
  for (int i = 0; i < side.numQuantized(); ++i) {
    for (int c = 0; c < d; ++c) {
      int group = side.groupOf(i, c);
      ASSERT_LT(group, side.numGroups());
      ++seen[group];
      if (seen[group] > 1)
        continue;
      // (i, c) is the group's first element in this scan order.
      std::vector<float> x(g);
      for (int e = 0; e < g; ++e)
        x[e] = side.scheme().span == Span::Tokens ? input(i + e, c)
                                                  : input(i, c + e);
      QuantizedGroup expected = quantizeGroup(side.scheme(), x.data(), g);
      ASSERT_EQ(side.groupCodes(group), expected.codes) << "group " << group;
      ASSERT_EQ(toF32Bits(side.scales()[group]), toF32Bits(expected.scale));
      ASSERT_EQ(toF32Bits(side.zeros()[group]), toF32Bits(expected.zero));
      std::vector<uint32_t> packed = side.packedGroup(group);
      ASSERT_EQ(int(packed.size()), packedWords(g, side.scheme().bits));
      ASSERT_EQ(unpackCodes(packed.data(), g, side.scheme().bits),
                expected.codes);
    }
  }
  for (int count : seen)
    ASSERT_EQ(count, g);
}

TEST(Slice, GroupsMatchQuantizingRawRows) {
  std::mt19937 rng(7);
  for (const SliceConfig &config : {kivi2(), innerQBase(), innerQHybrid()}) {
    const int total = 900;
    std::vector<float> k = randomRows(rng, total, kHeadDim);
    std::vector<float> v = randomRows(rng, total, kHeadDim);
    Slice slice(config);
    appendChunked(slice, k, v, 0, total, {300, 1, 17});
    checkGroupsFromRawRows(slice.keys(), k);
    checkGroupsFromRawRows(slice.values(), v);
  }
}

TEST(Slice, HybridValuesUseBothModes) {
  std::mt19937 rng(8);
  std::vector<float> k = randomRows(rng, 800, kHeadDim);
  std::vector<float> v = randomRows(rng, 800, kHeadDim);
  // Half the channels sit far from zero (asym wins), the other half are
  // sparse spikes around zero (sym's zero level wins).
  for (size_t i = 0; i < v.size(); ++i) {
    size_t token = i / kHeadDim;
    if (i % kHeadDim < kHeadDim / 2)
      v[i] = storeParam(v[i] * 0.1f + 4.0f, ParamType::F16);
    else
      v[i] = token % 16 == 0 ? (token % 32 == 0 ? 1.0f : -1.0f) : 0.0f;
  }
  Slice slice(innerQHybrid());
  slice.append(k.data(), v.data(), 800);
  int asym = 0;
  for (float s : slice.values().scales())
    asym += std::signbit(s);
  EXPECT_GT(asym, 0);
  EXPECT_LT(asym, slice.values().numGroups());
}

TEST(Slice, KeyNormsComeFromTheFirstAppend) {
  std::mt19937 rng(9);
  const int d = kHeadDim;
  std::vector<float> prompt = randomRows(rng, 50, d);
  for (int t = 0; t < 50; ++t)
    prompt[size_t(t) * d + 3] = 0.0f; // an all-zero channel
  prompt[size_t(7) * d + 1] = -9.0f;  // the largest |K| of channel 1
  for (int t = 0; t < 50; ++t)
    if (t != 7)
      prompt[size_t(t) * d + 1] = 0.5f;
  Slice slice(innerQBase());
  slice.append(prompt.data(), prompt.data(), 50);
  std::vector<float> norms = slice.keyNorms();
  ASSERT_EQ(int(norms.size()), d);
  EXPECT_EQ(norms[1], 3.0f);
  EXPECT_EQ(norms[3], 1.0f);
  for (int c = 0; c < d; ++c) {
    float mx = 0;
    for (int t = 0; t < 50; ++t)
      mx = std::max(mx, std::fabs(prompt[size_t(t) * d + c]));
    EXPECT_EQ(norms[c], mx == 0 ? 1.0f : std::sqrt(mx));
  }
  // Larger later keys do not change the norms.
  std::vector<float> big = randomRows(rng, 300, d);
  for (float &x : big)
    x *= 100.0f;
  slice.append(big.data(), big.data(), 300);
  EXPECT_EQ(bitsOf(slice.keyNorms()), bitsOf(norms));
  // Values are never normalised.
  EXPECT_TRUE(slice.values().norms().empty());
}

TEST(Slice, NormalisedKeysReconstructWithinHalfAScale) {
  std::mt19937 rng(10);
  const int d = kHeadDim, total = 400;
  std::vector<float> k = randomRows(rng, total, d);
  Slice slice(innerQBase());
  slice.append(k.data(), k.data(), total);
  const CacheSide &keys = slice.keys();
  const std::vector<float> &n = keys.norms();
  for (int i = 0; i < keys.numQuantized(); ++i) {
    for (int c = 0; c < d; ++c) {
      float x = k[size_t(keys.numSink() + i) * d + c] / n[c];
      float s = keys.scales()[keys.groupOf(i, c)];
      ASSERT_LE(std::fabs(keys.dequantizedAt(i, c) - x), s / 2 + 1e-6f);
    }
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Direct fp64 attention over unquantized rows.
std::vector<double> directAttention(const std::vector<float> &q, int heads,
                                    const std::vector<float> &k,
                                    const std::vector<float> &v, int total,
                                    int d, double scale) {
  std::vector<double> out(size_t(heads) * d, 0.0);
  for (int h = 0; h < heads; ++h) {
    std::vector<double> s(total);
    double mx = -INFINITY;
    for (int t = 0; t < total; ++t) {
      double dot = 0;
      for (int c = 0; c < d; ++c)
        dot += double(q[size_t(h) * d + c]) * double(k[size_t(t) * d + c]);
      s[t] = scale * dot;
      mx = std::max(mx, s[t]);
    }
    double z = 0;
    for (double &x : s)
      z += (x = std::exp(x - mx));
    for (int t = 0; t < total; ++t)
      for (int c = 0; c < d; ++c)
        out[size_t(h) * d + c] += s[t] / z * double(v[size_t(t) * d + c]);
  }
  return out;
}

SliceConfig eightBit(bool keyNorm) {
  SliceConfig c;
  c.headDim = kHeadDim;
  Mode keyMode = keyNorm ? Mode::Sym : Mode::Asym;
  c.key = {scheme(keyMode, 8, keyNorm ? Span::Channels : Span::Tokens, 32), 4,
           16, keyNorm ? 1 : 32};
  c.value = {scheme(Mode::Asym, 8, Span::Channels, 32), 4, 16, 1};
  c.key.scheme.params = ParamType::F32;
  c.value.scheme.params = ParamType::F32;
  c.keyNorm = keyNorm;
  return c;
}

TEST(Slice, EightBitAttentionIsCloseToUnquantized) {
  std::mt19937 rng(11);
  const int d = kHeadDim, total = 600, heads = 4;
  std::vector<float> k = randomRows(rng, total, d, /*outliers=*/false);
  std::vector<float> v = randomRows(rng, total, d, /*outliers=*/false);
  std::vector<float> q = randomRows(rng, heads, d, /*outliers=*/false);
  double scale = 1.0 / std::sqrt(double(d));
  std::vector<double> expected =
      directAttention(q, heads, k, v, total, d, scale);
  for (bool keyNorm : {false, true}) {
    Slice slice(eightBit(keyNorm));
    appendChunked(slice, k, v, 0, total, {100, 1});
    ASSERT_GT(slice.keys().numQuantized(), 500);
    std::vector<double> out(size_t(heads) * d);
    slice.attend(q.data(), heads, scale, out.data());
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_NEAR(out[i], expected[i], 0.02) << "keyNorm " << keyNorm;
    // And the quantization is not a no-op.
    double diff = 0;
    for (size_t i = 0; i < out.size(); ++i)
      diff = std::max(diff, std::fabs(out[i] - expected[i]));
    EXPECT_GT(diff, 0.0);
  }
}

/// Attention from the public accessors alone, following the documented
/// order: (q_c * n_c) against normalised quantized keys, q against the
/// full-precision ones.
std::vector<double> attentionFromParts(const Slice &slice,
                                       const std::vector<float> &q, int heads,
                                       double scale) {
  const int d = slice.config().headDim, total = slice.numTokens();
  const CacheSide &keys = slice.keys(), &values = slice.values();
  auto keyAt = [&](int t, int c) -> float {
    if (t < keys.numSink())
      return keys.sinkRows()[size_t(t) * d + c];
    int i = t - keys.numSink();
    if (i < keys.numQuantized())
      return keys.dequantizedAt(i, c);
    return keys.windowRows()[size_t(i - keys.numQuantized()) * d + c];
  };
  auto valueAt = [&](int t, int c) -> float {
    if (t < values.numSink())
      return values.sinkRows()[size_t(t) * d + c];
    int i = t - values.numSink();
    if (i < values.numQuantized())
      return values.dequantizedAt(i, c);
    return values.windowRows()[size_t(i - values.numQuantized()) * d + c];
  };
  std::vector<double> out(size_t(heads) * d, 0.0);
  for (int h = 0; h < heads; ++h) {
    std::vector<double> e(total);
    for (int t = 0; t < total; ++t) {
      bool normalised =
          !keys.norms().empty() && keys.regionOf(t) == Region::Quantized;
      double dot = 0;
      for (int c = 0; c < d; ++c) {
        double qc = double(q[size_t(h) * d + c]);
        if (normalised)
          qc = qc * double(keys.norms()[c]);
        dot += qc * double(keyAt(t, c));
      }
      e[t] = scale * dot;
    }
    double mx = *std::max_element(e.begin(), e.end());
    double z = 0;
    for (double &x : e) {
      x = std::exp(x - mx);
      z += x;
    }
    for (int t = 0; t < total; ++t) {
      double p = e[t] / z;
      for (int c = 0; c < d; ++c)
        out[size_t(h) * d + c] += p * double(valueAt(t, c));
    }
  }
  return out;
}

TEST(Slice, AttentionEqualsRecomputationFromParts) {
  std::mt19937 rng(12);
  const int d = kHeadDim, heads = 3;
  for (const SliceConfig &config : {kivi2(), innerQBase(), innerQHybrid()}) {
    for (int total : {1, 40, 333}) {
      std::vector<float> k = randomRows(rng, total, d);
      std::vector<float> v = randomRows(rng, total, d);
      std::vector<float> q = randomRows(rng, heads, d);
      Slice slice(config);
      appendChunked(slice, k, v, 0, total, {0});
      std::vector<double> out(size_t(heads) * d);
      slice.attend(q.data(), heads, 0.125, out.data());
      std::vector<double> expected = attentionFromParts(slice, q, heads, 0.125);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], expected[i]) << "total " << total << " i " << i;
    }
  }
}

TEST(Slice, AttentionOfEmptySliceIsZero) {
  Slice slice(kivi2());
  std::vector<float> q(kHeadDim, 1.0f);
  std::vector<double> out(kHeadDim, 5.0);
  slice.attend(q.data(), 1, 0.125, out.data());
  EXPECT_EQ(out, std::vector<double>(kHeadDim, 0.0));
}

TEST(Slice, LongSliceFollowsFlushRule) {
  // A 32k-token InnerQ-hybrid slice at head_dim 128: prompt, then decode
  // appends one at a time, then one attention. Timing is recorded, not
  // asserted (performance belongs to benchmarks).
  std::mt19937 rng(13);
  const int d = 128, total = 32768, prompt = 32000, heads = 4;
  std::vector<float> k = randomRows(rng, total, d);
  std::vector<float> v = randomRows(rng, total, d);
  std::vector<float> q = randomRows(rng, heads, d);
  auto start = std::chrono::steady_clock::now();
  Slice slice(innerQHybrid(d));
  slice.append(k.data(), v.data(), prompt);
  appendChunked(slice, k, v, prompt, total, {1});
  std::vector<double> out(size_t(heads) * d);
  slice.attend(q.data(), heads, 1.0 / std::sqrt(double(d)), out.data());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_EQ(slice.numTokens(), total);
  // Keys flush one token at a time past sink 32 + window 96; values flush
  // whole groups of 32.
  EXPECT_EQ(slice.keys().numQuantized(), total - 32 - 96);
  EXPECT_EQ(slice.values().numQuantized(), (total - 32 - 96) / 32 * 32);
  for (double x : out)
    EXPECT_TRUE(std::isfinite(x));
  RecordProperty("seconds", std::to_string(seconds));
}

TEST(Slice, Validation) {
  EXPECT_EQ(validate(kivi2()), "");
  SliceConfig badUnit = kivi2();
  badUnit.key.flushUnit = 100; // not a multiple of G = 32 for span=tokens
  EXPECT_NE(validate(badUnit), "");
  SliceConfig badDim = kivi2(48); // span=channels G = 32 does not divide 48
  EXPECT_NE(validate(badDim), "");
}

} // namespace
