//===- OutlierPoolTest.cpp - OTT pools through the runtime ----------------===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// The OTT test spec (Runtime/Specs/ott-d64-gqa4.mlir: pools of 3 + 4 entries
// from layer 1) through libkvq_runtime; EndToEndTest compares its pools with
// the reference bit for bit, these check what the reference does not see:
// the tracker reaches each of its states, forks and saved files carry the
// pools, a file with an impossible pool index is rejected without changing
// the cache, and a layer without pools has none to read.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"
#include "kvq/ABI/ManifestBinding.h"

#include "gtest/gtest.h"

#include <cstring>
#include <random>

using namespace kvq::runtime;

namespace {

constexpr unsigned kHq = 8, kHkv = 2, kD = 64, kTracked = 1;
constexpr unsigned kIndexWords = 4 + 3 + 4;

std::unique_ptr<Cache> makeCache(unsigned Seqs) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(KVQ_ARTIFACT_DIR_E2E_OTT_D64_GQA4);
  EXPECT_TRUE(A.ok()) << A.message();
  if (!A.ok())
    return nullptr;
  CacheOptions O;
  O.MaxSequences = Seqs;
  O.PagesPerTensor = 32;
  O.Threads = 2;
  Expected<std::unique_ptr<Cache>> C = Cache::create(*A, O);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? std::move(*C) : nullptr;
}

std::vector<float> randomTokens(std::mt19937 &Rng, unsigned N) {
  std::normal_distribution<float> Dist(0.0f, 1.0f);
  std::vector<float> X(size_t(N) * kHkv * kD);
  for (float &V : X)
    V = Dist(Rng);
  return X;
}

/// Appends N random tokens to both layers of Seq, keys scaled by KeyScale.
void grow(Cache &C, SequenceId Seq, unsigned N, std::mt19937 &Rng,
          float KeyScale = 1.0f) {
  for (unsigned L = 0; L < 2; ++L) {
    std::vector<float> K = randomTokens(Rng, N), V = randomTokens(Rng, N);
    for (float &X : K)
      X *= KeyScale;
    Status S = C.append(L, {AppendItemF32{Seq, N, K.data(), V.data()}});
    ASSERT_TRUE(S.ok()) << S.message();
  }
}

/// The pool index and entries of Seq's tracked layer.
struct Pools {
  std::vector<uint32_t> Index;
  std::vector<uint8_t> Keys, Values;
  bool operator==(const Pools &O) const {
    return Index == O.Index && Keys == O.Keys && Values == O.Values;
  }
};

Pools readPools(Cache &C, SequenceId Seq) {
  return {*C.readPoolIndex(Seq, kTracked),
          *C.readPoolEntries(Tensor::Keys, Seq, kTracked),
          *C.readPoolEntries(Tensor::Values, Seq, kTracked)};
}

std::vector<float> attention(Cache &C, SequenceId Seq) {
  std::vector<float> Q(kHq * kD), Out;
  for (size_t I = 0; I < Q.size(); ++I)
    Q[I] = float(I % 7) / 4.0f - 0.7f;
  EXPECT_TRUE(C.attendF32(kTracked, {Seq}, Q, Out).ok());
  return Out;
}

TEST(OutlierPoolTest, TrackerReachesEveryState) {
  std::unique_ptr<Cache> C = makeCache(2);
  ASSERT_TRUE(C);
  std::mt19937 Rng(3);
  // One flush of 32 (4 sink + 32 + 16 recent): three tokens enter.
  SequenceId Short = *C->addSequence();
  grow(*C, Short, 52, Rng);
  std::vector<uint32_t> Index = *C->readPoolIndex(Short, kTracked);
  ASSERT_EQ(Index.size(), kHkv * kIndexWords);
  for (unsigned H = 0; H < kHkv; ++H) {
    const uint32_t *W = &Index[H * kIndexWords];
    EXPECT_EQ(W[0], 3u);
    EXPECT_EQ(W[1], 0u);
    EXPECT_EQ(W[2], 0u);
    for (unsigned E = 0; E < 3; ++E)
      EXPECT_TRUE(W[4 + E] >= 4 && W[4 + E] < 36) << "position " << W[4 + E];
  }
  // 21 flushes: drops fill the 4 extra entries and tracking stops.
  SequenceId Long = *C->addSequence();
  grow(*C, Long, 700, Rng);
  Index = *C->readPoolIndex(Long, kTracked);
  for (unsigned H = 0; H < kHkv; ++H) {
    const uint32_t *W = &Index[H * kIndexWords];
    EXPECT_EQ(W[0], 3u);
    EXPECT_GT(W[1], 0u);
    EXPECT_EQ(W[2], 1u) << "kv-head " << H << " still tracking";
  }
  // Pools count at capacity, as kvq-opt --kvq-report-bits counts them: per
  // sequence, 2 kv-heads x (7 entries x 2 x 64 x 2 bytes + 11 x 4 bytes).
  EXPECT_EQ(C->memoryStats().PoolBytes, 2u * 3672u);
  // The untracked layer has no pools.
  Expected<std::vector<uint32_t>> None = C->readPoolIndex(Long, 0);
  EXPECT_FALSE(None.ok());
  EXPECT_NE(None.message().find("no outlier pools"), std::string::npos);
  // A slot reused by a new sequence starts with empty pools.
  ASSERT_TRUE(C->removeSequence(Short).ok());
  SequenceId Fresh = *C->addSequence();
  Index = *C->readPoolIndex(Fresh, kTracked);
  EXPECT_EQ(Index, std::vector<uint32_t>(kHkv * kIndexWords, 0u));
}

TEST(OutlierPoolTest, ForkCarriesThePools) {
  std::unique_ptr<Cache> C = makeCache(3);
  ASSERT_TRUE(C);
  std::mt19937 Rng(5);
  // One flush: the pools are full and still tracking.
  SequenceId A = *C->addSequence();
  grow(*C, A, 52, Rng);
  Expected<SequenceId> B = C->forkSequence(A);
  ASSERT_TRUE(B.ok()) << B.message();
  EXPECT_TRUE(readPools(*C, A) == readPools(*C, *B));
  EXPECT_EQ(attention(*C, A), attention(*C, *B));
  // Keys a thousand times smaller are outliers: the next flush unit (16
  // window tokens, 16 of these) has three of them enter the fork's pools
  // and all three members drop to its extra pool; the source is unchanged.
  Pools Before = readPools(*C, A);
  std::vector<float> Attention = attention(*C, A);
  grow(*C, *B, 32, Rng, 1e-3f);
  EXPECT_TRUE(Before == readPools(*C, A));
  EXPECT_EQ(Attention, attention(*C, A));
  Pools Forked = readPools(*C, *B);
  for (unsigned H = 0; H < kHkv; ++H) {
    EXPECT_EQ(Forked.Index[H * kIndexWords], 3u);
    EXPECT_EQ(Forked.Index[H * kIndexWords + 1], 3u);
    EXPECT_EQ(Forked.Index[H * kIndexWords + 2], 0u);
  }
}

TEST(OutlierPoolTest, SavedFilesCarryThePools) {
  std::unique_ptr<Cache> C = makeCache(1), D = makeCache(1);
  ASSERT_TRUE(C && D);
  std::mt19937 Rng(13);
  SequenceId A = *C->addSequence();
  grow(*C, A, 300, Rng);
  Expected<std::vector<uint8_t>> File = C->serialize();
  ASSERT_TRUE(File.ok()) << File.message();
  Expected<std::vector<SequenceId>> Ids =
      D->deserialize(File->data(), File->size());
  ASSERT_TRUE(Ids.ok()) << Ids.message();
  EXPECT_TRUE(readPools(*C, A) == readPools(*D, Ids->front()));
  EXPECT_EQ(attention(*C, A), attention(*D, Ids->front()));
}

TEST(OutlierPoolTest, ImpossiblePoolIndexIsRejected) {
  std::unique_ptr<Cache> C = makeCache(1), D = makeCache(1);
  ASSERT_TRUE(C && D);
  std::mt19937 Rng(17);
  SequenceId A = *C->addSequence();
  grow(*C, A, 300, Rng);
  std::vector<uint8_t> File = *C->serialize();
  // The record ends with the tracked layer's index, key and value entries;
  // then the 8-byte checksum, recomputed so that only the index is wrong.
  size_t Entries = size_t(3 + 4) * kHkv * kD * 2;
  size_t Index = File.size() - 8 - 2 * Entries - kHkv * kIndexWords * 4;
  auto Corrupt = [&](unsigned Word, uint32_t Value) {
    std::vector<uint8_t> Bad = File;
    std::memcpy(&Bad[Index + Word * 4], &Value, 4);
    uint64_t Sum = kvq::fnv1a64(std::string_view(
        reinterpret_cast<const char *>(Bad.data()), Bad.size() - 8));
    std::memcpy(&Bad[Bad.size() - 8], &Sum, 8);
    return Bad;
  };
  // A pool count past the capacity, and a position past the quantized
  // tokens (the file holds 300: 4 sink, 256 quantized).
  for (auto [Word, Value] : {std::pair<unsigned, uint32_t>{0, 9},
                             std::pair<unsigned, uint32_t>{4, 280}}) {
    std::vector<uint8_t> Bad = Corrupt(Word, Value);
    Expected<std::vector<SequenceId>> Ids =
        D->deserialize(Bad.data(), Bad.size());
    ASSERT_FALSE(Ids.ok());
    EXPECT_NE(Ids.message().find("impossible outlier pool index"),
              std::string::npos)
        << Ids.message();
    EXPECT_EQ(D->numSequences(), 0u);
  }
  // The untouched file restores.
  EXPECT_TRUE(D->deserialize(File.data(), File.size()).ok());
}

} // namespace
