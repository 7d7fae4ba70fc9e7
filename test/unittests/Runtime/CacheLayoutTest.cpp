//===- CacheLayoutTest.cpp - the cache layout arithmetic ------------------===//
//
// Part of kvq, the runtime tests. kvq/ABI/CacheLayout.h against layouts
// computed by hand from docs/KernelABI.md ("Page layout", "Window rings",
// "Outlier pools").
//
//===----------------------------------------------------------------------===//

#include "kvq/ABI/CacheLayout.h"

#include "gtest/gtest.h"

#include <string>

using namespace kvq::abi;

namespace {

SliceScheme quantScheme(unsigned Bits, unsigned Group, bool SpanTokens,
                        bool Sym, unsigned ParamBytes) {
  SliceScheme S;
  S.Quantized = true;
  S.Bits = Bits;
  S.Group = Group;
  S.SpanTokens = SpanTokens;
  S.Sym = Sym;
  S.ParamBytes = ParamBytes;
  return S;
}

TEST(CacheLayoutTest, KiviKeysInTokenGroups) {
  // docs/KernelABI.md's example: 2-bit asym keys in groups of 32 tokens,
  // 128-token pages, head_dim 128, f16 parameters.
  SliceLayout S = computeSliceLayout(quantScheme(2, 32, true, false, 2),
                                     PageShape{128, 8, 128, 2});
  EXPECT_EQ(S.WordsPerGroup, 2u);   // 32 codes x 2 bits
  EXPECT_EQ(S.GroupsPerToken, 0u);  // span = tokens
  EXPECT_EQ(S.GroupsPerPage, 512u); // 4 token blocks x 128 channels
  EXPECT_EQ(S.CodesBytes, 4096u);
  EXPECT_EQ(S.ScalesOffset, 4096u);
  EXPECT_EQ(S.ZerosOffset, 5120);
  EXPECT_EQ(S.SliceBytes, 6144u);
  EXPECT_EQ(findLayoutError(S), nullptr);
}

TEST(CacheLayoutTest, SymChannelGroupsPadTheirArrays) {
  // 3-bit sym, groups of 24 channels of head_dim 48, 5-token pages, f8
  // scales: 72 bits take 3 words; 10 groups a page; 10 one-byte scales
  // take a 16-byte region; no zero-points.
  SliceLayout S = computeSliceLayout(quantScheme(3, 24, false, true, 1),
                                     PageShape{5, 1, 48, 2});
  EXPECT_EQ(S.WordsPerGroup, 3u);
  EXPECT_EQ(S.GroupsPerToken, 2u);
  EXPECT_EQ(S.GroupsPerPage, 10u);
  EXPECT_EQ(S.CodesBytes, 128u); // 30 words = 120 bytes, padded to 16
  EXPECT_EQ(S.ScalesOffset, 128u);
  EXPECT_EQ(S.ZerosOffset, -1);
  EXPECT_EQ(S.SliceBytes, 144u);
  EXPECT_FALSE(S.hasZeros());
}

TEST(CacheLayoutTest, FullPrecisionSlicesHoldTheirTokens) {
  SliceLayout S = computeSliceLayout(SliceScheme(), PageShape{3, 2, 4, 2});
  EXPECT_EQ(S.SliceBytes, 32u); // 24 bytes, padded to 16
  EXPECT_EQ(S.CodesBytes, 0u);
  EXPECT_EQ(S.ZerosOffset, -1);
}

TEST(CacheLayoutTest, ReorderedGroupsStartOnWords) {
  // 2-bit codes in groups of 3 + 5 (kv-head 0) and 4 + 4 (kv-head 1)
  // channels: a word per group, 2 words a token for both heads.
  SliceScheme Scheme = quantScheme(2, 4, false, false, 2);
  Scheme.ReorderSizes = {3, 5, 4, 4};
  SliceLayout S = computeSliceLayout(Scheme, PageShape{4, 2, 8, 2});
  EXPECT_EQ(S.WordsPerGroup, 0u);
  EXPECT_EQ(S.WordsPerToken, 2u);
  EXPECT_EQ(S.GroupWords, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(S.CodesBytes, 32u);
  EXPECT_EQ(findLayoutError(S), nullptr);
  // 8-bit codes: kv-head 0's group of 5 takes two words, so every token
  // takes 3.
  Scheme.Bits = 8;
  S = computeSliceLayout(Scheme, PageShape{4, 2, 8, 2});
  EXPECT_EQ(S.WordsPerToken, 3u);
  EXPECT_EQ(S.GroupWords, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(S.CodesBytes, 48u);
}

TEST(CacheLayoutTest, SharingLayersStoreParametersAndFindTheirOwner) {
  SliceScheme Owner = quantScheme(2, 32, true, false, 2);
  SliceScheme Sharer = Owner;
  Sharer.CodesFrom = 0;
  PageShape Shape{128, 8, 128, 2};
  std::vector<SliceLayout> Slices = {computeSliceLayout(Owner, Shape),
                                     computeSliceLayout(Sharer, Shape)};
  EXPECT_EQ(Slices[1].CodesBytes, 0u);
  EXPECT_EQ(Slices[1].ScalesOffset, 0u);
  EXPECT_EQ(Slices[1].SliceBytes, 2048u);
  EXPECT_EQ(placeSlices(Slices, 8), 8u * 6144 + 8u * 2048);
  EXPECT_EQ(Slices[0].Offset, 0u);
  EXPECT_EQ(Slices[1].Offset, 8u * 6144);
  // Kv-head h of the sharer finds the owner's codes for h at
  // delta + h * head delta from its own slice.
  EXPECT_EQ(Slices[1].CodesLayerDelta, -int64_t(8 * 6144));
  EXPECT_EQ(Slices[1].CodesHeadDelta, 6144 - 2048);
  for (int64_t H = 0; H < 8; ++H)
    EXPECT_EQ(int64_t(Slices[1].Offset) + H * Slices[1].SliceBytes +
                  Slices[1].CodesLayerDelta + H * Slices[1].CodesHeadDelta,
              int64_t(Slices[0].Offset) + H * Slices[0].SliceBytes);
}

TEST(CacheLayoutTest, FindsBrokenRules) {
  SliceLayout Good = computeSliceLayout(quantScheme(2, 32, true, false, 2),
                                        PageShape{128, 8, 128, 2});
  auto errorOf = [&](auto Edit) {
    SliceLayout S = Good;
    Edit(S);
    const char *Error = findLayoutError(S);
    return std::string(Error ? Error : "");
  };
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.ScalesOffset = 4100; }),
            "slice offsets and sizes must be multiples of 16 bytes");
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.ZerosOffset = 5136; }),
            "codes or parameters lie outside the slice");
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.CodesBytes = 6160; }),
            "codes or parameters lie outside the slice");
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.CodesFrom = -2; }),
            "codes_from must be -1 or a layer");
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.WordsPerToken = 3; }),
            "words_per_token needs group_words");
  EXPECT_EQ(errorOf([](SliceLayout &S) {
              S.GroupWords = {0, 1};
            }),
            "group_words needs groups_per_token and no words_per_group");
  EXPECT_EQ(errorOf([](SliceLayout &S) {
              S.WordsPerGroup = 0;
              S.GroupsPerToken = 2;
              S.WordsPerToken = 2;
              S.GroupWords = {0, 2};
            }),
            "group_words must lie in [0, words_per_token)");
  // An offset near 2^64 does not wrap into the slice.
  EXPECT_EQ(errorOf([](SliceLayout &S) { S.ZerosOffset = INT64_MAX - 15; }),
            "codes or parameters lie outside the slice");
}

TEST(CacheLayoutTest, WindowRingsHoldAFlushUnitLessOne) {
  // KIVI's values: 128 recent tokens and a flush of 1 need 128 rows; its
  // keys (recent 1, flush 128) as many.
  EXPECT_EQ(getWindowCapacity(128, 1), 128u);
  EXPECT_EQ(getWindowCapacity(1, 128), 128u);
  EXPECT_EQ(getWindowCapacity(0, 1), 0u);
  // The dialect's bounds (2^20 each) do not wrap.
  EXPECT_EQ(getWindowCapacity(1u << 20, 1u << 20), (uint64_t(1) << 21) - 1);
}

TEST(CacheLayoutTest, PoolsCountTheirEntriesAndIndexWords) {
  PoolLayout P = computePoolLayout(3, 32, 2);
  EXPECT_EQ(P.Entries, 35u);
  EXPECT_EQ(P.IndexWords, 39u); // 4 counters, then a position per entry
  EXPECT_TRUE(P.isTracked(2));
  EXPECT_FALSE(P.isTracked(1));
  PoolLayout None = computePoolLayout(0, 32, 7);
  EXPECT_EQ(None.Extra, 0u);
  EXPECT_EQ(None.Entries, 0u);
  EXPECT_EQ(None.IndexWords, 0u);
  EXPECT_EQ(None.FirstLayer, 7u);
  EXPECT_FALSE(None.isTracked(8));
}

} // namespace
