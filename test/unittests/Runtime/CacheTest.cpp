//===- CacheTest.cpp - Cache logic on the mock artifact -------------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// The mock artifact (Inputs/mock, MockKernels.cpp) stores flushed tokens at
// full precision, so after any sequence of appends every region of every
// (sequence, layer) is known exactly: sink = the first S tokens, window =
// the newest tokens left by the flush rule, page position i = quantized
// token i. These tests check the cache's bookkeeping (flush rule, sinks,
// pages, tables, slots, splits) and its error guarantees against a
// straightforward model of the rule.
//
//===----------------------------------------------------------------------===//

#include "MockCache.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

using namespace kvq::runtime;

namespace {

using namespace kvq::runtime::mock;

//===----------------------------------------------------------------------===//
// Appends and attention
//===----------------------------------------------------------------------===//

TEST(CacheTest, PrefillThenDecodeFollowsTheFlushRule) {
  std::unique_ptr<Cache> C = makeCache();
  ASSERT_TRUE(C);
  std::mt19937 Rng(1);
  std::vector<unsigned> Prompts = {0, 1, 2, 3, 7, 23};
  std::vector<SequenceId> Seqs;
  std::map<SequenceId, SliceModel> Models[2];
  for (size_t I = 0; I < Prompts.size(); ++I) {
    Expected<SequenceId> Id = C->addSequence();
    ASSERT_TRUE(Id.ok());
    Seqs.push_back(*Id);
  }
  for (unsigned L = 0; L < 2; ++L) {
    std::vector<std::vector<uint16_t>> Data;
    std::vector<AppendItem> Batch;
    for (size_t S = 0; S < Seqs.size(); ++S) {
      Data.push_back(randomTokens(Rng, Prompts[S]));
      Data.push_back(randomTokens(Rng, Prompts[S]));
      Batch.push_back({Seqs[S], Prompts[S], Data[Data.size() - 2].data(),
                       Data.back().data()});
      Models[L][Seqs[S]].K.append(Data[Data.size() - 2].data(), Prompts[S]);
      Models[L][Seqs[S]].V.append(Data.back().data(), Prompts[S]);
    }
    ASSERT_TRUE(C->append(L, Batch).ok());
  }
  for (unsigned Step = 0; Step < 12; ++Step) {
    SCOPED_TRACE("decode step " + std::to_string(Step));
    for (unsigned L = 0; L < 2; ++L) {
      std::vector<std::vector<uint16_t>> Data;
      std::vector<AppendItem> Batch;
      for (SequenceId Seq : Seqs) {
        Data.push_back(randomTokens(Rng, 1));
        Data.push_back(randomTokens(Rng, 1));
        Batch.push_back(
            {Seq, 1, Data[Data.size() - 2].data(), Data.back().data()});
        Models[L][Seq].K.append(Data[Data.size() - 2].data(), 1);
        Models[L][Seq].V.append(Data.back().data(), 1);
      }
      ASSERT_TRUE(C->append(L, Batch).ok());
      std::vector<const SliceModel *> Ms;
      for (SequenceId Seq : Seqs) {
        checkSide(*C, Seq, L, Tensor::Keys, Models[L][Seq].K);
        checkSide(*C, Seq, L, Tensor::Values, Models[L][Seq].V);
        Ms.push_back(&Models[L][Seq]);
      }
      checkAttention(*C, L, Seqs, Ms, Rng);
    }
  }
}

TEST(CacheTest, BulkAppendEqualsSingleTokenAppends) {
  std::mt19937 Rng(2);
  for (unsigned N : {1u, 2u, 5u, 6u, 9u, 19u, 40u}) {
    SCOPED_TRACE("tokens " + std::to_string(N));
    std::unique_ptr<Cache> Bulk = makeCache(), Single = makeCache();
    SequenceId A = *Bulk->addSequence(), B = *Single->addSequence();
    std::vector<uint16_t> K = randomTokens(Rng, N), V = randomTokens(Rng, N);
    for (unsigned L = 0; L < 2; ++L) {
      ASSERT_TRUE(Bulk->append(L, {{A, N, K.data(), V.data()}}).ok());
      for (unsigned I = 0; I < N; ++I)
        ASSERT_TRUE(
            Single
                ->append(L, {{B, 1, K.data() + I * kRow, V.data() + I * kRow}})
                .ok());
    }
    EXPECT_TRUE(snapshot(*Bulk, {A}) == snapshot(*Single, {B}));
  }
}

TEST(CacheTest, SplitsCoverLongContexts) {
  // 5-token splits: 2 + 61 tokens gives 13 splits, with an empty sequence
  // and a one-token sequence in the same batch.
  std::unique_ptr<Cache> C = makeCache();
  std::mt19937 Rng(3);
  SequenceId Long = *C->addSequence(), Empty = *C->addSequence(),
             One = *C->addSequence();
  SliceModel MLong, MEmpty, MOne;
  std::vector<uint16_t> K = randomTokens(Rng, 63), V = randomTokens(Rng, 63);
  ASSERT_TRUE(C->append(0, {{Long, 63, K.data(), V.data()},
                            {One, 1, K.data(), V.data()}})
                  .ok());
  MLong.K.append(K.data(), 63);
  MLong.V.append(V.data(), 63);
  MOne.K.append(K.data(), 1);
  MOne.V.append(V.data(), 1);
  checkAttention(*C, 0, {Long, Empty, One}, {&MLong, &MEmpty, &MOne}, Rng);
  // An empty sequence attends to zero.
  std::vector<uint16_t> Q(kHq * kD, kvq::ref::toF16Bits(1.0f));
  std::vector<float> Out(kHq * kD, 7.0f);
  ASSERT_TRUE(C->attend(0, {Empty}, Q.data(), Out.data()).ok());
  for (float X : Out)
    EXPECT_EQ(X, 0.0f);
}

TEST(CacheTest, ThreadCountDoesNotChangeResults) {
  std::mt19937 Rng(4);
  std::vector<uint16_t> K = randomTokens(Rng, 50), V = randomTokens(Rng, 50),
                        Q = randomTokens(Rng, 2);
  std::vector<std::vector<float>> Outs;
  for (unsigned Threads : {1u, 2u, 4u}) {
    std::unique_ptr<Cache> C = makeCache(64, 8, Threads);
    SequenceId S = *C->addSequence();
    ASSERT_TRUE(C->append(1, {{S, 50, K.data(), V.data()}}).ok());
    Outs.emplace_back(kHq * kD);
    ASSERT_TRUE(C->attend(1, {S}, Q.data(), Outs.back().data()).ok());
  }
  EXPECT_EQ(Outs[0], Outs[1]);
  EXPECT_EQ(Outs[0], Outs[2]);
}

TEST(CacheTest, Float32AppendRoundsToTheModelDType) {
  std::unique_ptr<Cache> C = makeCache();
  SequenceId S = *C->addSequence();
  std::vector<float> K(kRow), V(kRow);
  for (unsigned I = 0; I < kRow; ++I) {
    K[I] = 1.0f + float(I) / 3.0f;
    V[I] = -0.1f * float(I);
  }
  ASSERT_TRUE(
      C->append(0, std::vector<AppendItemF32>{{S, 1, K.data(), V.data()}})
          .ok());
  // A braced list of float pointers selects the fp32 append too.
  ASSERT_TRUE(C->append(0, {{S, 1, K.data(), V.data()}}).ok());
  std::vector<uint8_t> Sink = *C->readSink(Tensor::Keys, S, 0);
  ASSERT_EQ(Sink.size(), 2 * kRow * 2u);
  for (unsigned I = 0; I < 2 * kRow; ++I) {
    uint16_t Bits;
    std::memcpy(&Bits, &Sink[I * 2], 2);
    EXPECT_EQ(Bits, kvq::ref::toF16Bits(K[I % kRow]));
  }
}

TEST(CacheTest, LargeFloat32AppendConvertsEveryChunk) {
  // 8,201 tokens of 16 elements: the conversion runs on the backend's
  // threads in chunks of 65,536 elements, here two whole and a partial one.
  constexpr unsigned kTokens = 8201;
  std::unique_ptr<Cache> C = makeCache(kTokens / kPageTokens + 4, 1);
  ASSERT_TRUE(C);
  SequenceId S = *C->addSequence();
  std::mt19937 Rng(9);
  std::normal_distribution<float> Dist(0.0f, 1.0f);
  std::vector<float> K(size_t(kTokens) * kRow), V(K.size());
  for (size_t I = 0; I < K.size(); ++I) {
    K[I] = Dist(Rng);
    V[I] = Dist(Rng);
  }
  ASSERT_TRUE(
      C->append(0, std::vector<AppendItemF32>{{S, kTokens, K.data(), V.data()}})
          .ok());
  SliceModel M;
  std::vector<uint16_t> KBits(K.size()), VBits(V.size());
  for (size_t I = 0; I < K.size(); ++I) {
    KBits[I] = kvq::ref::toF16Bits(K[I]);
    VBits[I] = kvq::ref::toF16Bits(V[I]);
  }
  M.K.append(KBits.data(), kTokens);
  M.V.append(VBits.data(), kTokens);
  checkSide(*C, S, 0, Tensor::Keys, M.K);
  checkSide(*C, S, 0, Tensor::Values, M.V);
}

//===----------------------------------------------------------------------===//
// Sequences and memory
//===----------------------------------------------------------------------===//

TEST(CacheTest, RemoveFreesPagesAndSlots) {
  std::unique_ptr<Cache> C = makeCache(8, 2);
  std::mt19937 Rng(5);
  SequenceId A = *C->addSequence(), B = *C->addSequence();
  Expected<SequenceId> Full = C->addSequence();
  ASSERT_FALSE(Full.ok());
  EXPECT_EQ(Full.message(), "cache full: all 2 sequence slots are in use");
  std::vector<uint16_t> K = randomTokens(Rng, 20), V = randomTokens(Rng, 20);
  ASSERT_TRUE(C->append(0, {{A, 20, K.data(), V.data()}}).ok());
  // 20 tokens: 2 sink; keys: 14 quantized (4 pages), 4 in the window;
  // values: 16 quantized (4 pages), 2 in the window.
  EXPECT_EQ(*C->numPages(Tensor::Keys, A), 4u);
  EXPECT_EQ(*C->numPages(Tensor::Values, A), 4u);
  EXPECT_EQ(C->freePages(Tensor::Keys), 4u);
  ASSERT_TRUE(C->removeSequence(A).ok());
  EXPECT_EQ(C->freePages(Tensor::Keys), 8u);
  EXPECT_EQ(C->freePages(Tensor::Values), 8u);
  EXPECT_FALSE(C->hasSequence(A));
  EXPECT_FALSE(C->removeSequence(A).ok());
  SequenceId A2 = *C->addSequence();
  EXPECT_NE(A2, A); // ids are never reused
  EXPECT_EQ(C->counts(A2, 0)->Keys.total(), 0u);
  SliceModel M;
  ASSERT_TRUE(C->append(0, {{A2, 9, K.data(), V.data()}}).ok());
  M.K.append(K.data(), 9);
  M.V.append(V.data(), 9);
  checkSide(*C, A2, 0, Tensor::Keys, M.K);
  checkSide(*C, A2, 0, Tensor::Values, M.V);
  EXPECT_TRUE(C->hasSequence(B));
}

TEST(CacheTest, MemoryStatsCountWhatSequencesHold) {
  std::unique_ptr<Cache> C = makeCache(16, 4);
  MemoryStats Empty = C->memoryStats();
  EXPECT_EQ(Empty.BytesUsed, 0u);
  EXPECT_EQ(Empty.BitsPerElement, 0.0);
  // Allocated: sinks 2 * (2 layers * 4 slots * 2 tokens * 32 B), windows
  // 2 * (2 * 4 * 4 * 32), pages 2 * 16 * 256, tables 2 * 4 * 16 * 4,
  // saturation counters 2 tensors * 2 layers * 4 B and the flushes'
  // NonFinite word.
  EXPECT_EQ(Empty.BytesAllocated,
            2u * 512 + 2u * 1024 + 2u * 4096 + 2u * 256 + 2u * 2 * 4 + 4);
  std::mt19937 Rng(6);
  SequenceId S = *C->addSequence();
  std::vector<uint16_t> K = randomTokens(Rng, 20), V = randomTokens(Rng, 20);
  ASSERT_TRUE(C->append(0, {{S, 20, K.data(), V.data()}}).ok());
  MemoryStats M = C->memoryStats();
  // Keys: 2 sink, 14 quantized, 4 window; values: 2 sink, 16, 2.
  EXPECT_EQ(M.KeyPagesInUse, 4u);
  EXPECT_EQ(M.ValuePagesInUse, 4u);
  EXPECT_EQ(M.PageBytes, 8u * 256);
  EXPECT_EQ(M.SinkBytes, 4u * 32);
  EXPECT_EQ(M.WindowBytes, 6u * 32);
  EXPECT_EQ(M.NormBytes, 0u);
  EXPECT_EQ(M.TableBytes, 8u * 4);
  EXPECT_EQ(M.BytesUsed, 2048u + 192 + 128 + 32);
  EXPECT_EQ(M.CachedElements, 2u * 20 * kRow);
  EXPECT_DOUBLE_EQ(M.BitsPerElement, 8.0 * 2400 / 640);
}

//===----------------------------------------------------------------------===//
// Errors change nothing
//===----------------------------------------------------------------------===//

class CacheErrorTest : public ::testing::Test {
protected:
  void SetUp() override {
    C = makeCache(8, 3, 2, 6);
    ASSERT_TRUE(C);
    std::mt19937 Rng(7);
    K = randomTokens(Rng, 40);
    V = randomTokens(Rng, 40);
    A = *C->addSequence();
    B = *C->addSequence();
    ASSERT_TRUE(
        C->append(0, {{A, 11, K.data(), V.data()}, {B, 5, K.data(), V.data()}})
            .ok());
    Before = snapshot(*C, {A, B});
  }

  /// Expects Result to fail with a message containing Text and the cache to
  /// be unchanged.
  void expectRejected(const Status &Result, const std::string &Text) {
    ASSERT_FALSE(Result.ok());
    EXPECT_NE(Result.message().find(Text), std::string::npos)
        << Result.message();
    EXPECT_TRUE(snapshot(*C, {A, B}) == Before) << Result.message();
  }

  std::unique_ptr<Cache> C;
  std::vector<uint16_t> K, V;
  SequenceId A = 0, B = 0;
  Snapshot Before;
};

TEST_F(CacheErrorTest, UnknownSequence) {
  expectRejected(
      C->append(0, {{A, 1, K.data(), V.data()}, {999, 1, K.data(), V.data()}}),
      "unknown sequence 999");
}

TEST_F(CacheErrorTest, LayerOutOfRange) {
  expectRejected(C->append(2, {{A, 1, K.data(), V.data()}}),
                 "layer 2 out of range (the model has 2)");
}

TEST_F(CacheErrorTest, NonFiniteValues) {
  std::vector<uint16_t> Bad = V;
  Bad[kRow + 3] = 0x7e00; // NaN at token 1, head 0, channel 3
  expectRejected(
      C->append(0, {{A, 2, K.data(), V.data()}, {B, 2, K.data(), Bad.data()}}),
      "non-finite value at token 1, kv-head 0, channel 3");
  std::vector<uint16_t> Inf = K;
  Inf[kD + 1] = 0xfc00; // -inf at token 0, head 1, channel 1
  expectRejected(C->append(1, {{A, 2, Inf.data(), V.data()}}),
                 "non-finite key at token 0, kv-head 1, channel 1");
  // A finite fp32 input that overflows f16 is named as such, not as a
  // non-finite value the caller never passed; an fp32 infinity stays
  // non-finite.
  std::vector<float> Big(kRow, 0.5f), Ok(kRow, 0.5f);
  Big[kD + 2] = 1e6f;
  expectRejected(
      C->append(0, std::vector<AppendItemF32>{{A, 1, Ok.data(), Big.data()}}),
      "value 1e+06 at token 0, kv-head 1, channel 2 of sequence " +
          std::to_string(A) + " overflows f16 (largest finite 65504)");
  Big[kD + 2] = INFINITY;
  expectRejected(
      C->append(0, std::vector<AppendItemF32>{{A, 1, Big.data(), Ok.data()}}),
      "non-finite key at token 0, kv-head 1, channel 2");
}

TEST(CacheTest, LongAppendsReportTheirFirstNonFiniteValue) {
  // The scan runs in chunks of 65536 elements (4096 tokens here) on the
  // backend's threads: whichever finds one first, the first is reported.
  constexpr unsigned Tokens = 3 * 4096 + 100;
  std::unique_ptr<Cache> C = makeCache(Tokens / kPageTokens + 64, 1);
  ASSERT_TRUE(C);
  std::mt19937 Rng(9);
  std::vector<uint16_t> K = randomTokens(Rng, Tokens),
                        V = randomTokens(Rng, Tokens);
  SequenceId S = *C->addSequence();
  Snapshot Before = snapshot(*C, {S});
  V[size_t(12000) * kRow] = 0x7e00;
  V[size_t(9000) * kRow + kD + 5] = 0x7c00;
  V[size_t(5000) * kRow + 2] = 0xfc00;
  Status Result = C->append(0, {{S, Tokens, K.data(), V.data()}});
  ASSERT_FALSE(Result.ok());
  EXPECT_NE(Result.message().find(
                "non-finite value at token 5000, kv-head 0, channel 2"),
            std::string::npos)
      << Result.message();
  EXPECT_TRUE(snapshot(*C, {S}) == Before);
  V[size_t(5000) * kRow + 2] = 0;
  V[size_t(9000) * kRow + kD + 5] = 0;
  V[size_t(12000) * kRow] = 0;
  EXPECT_TRUE(C->append(0, {{S, Tokens, K.data(), V.data()}}).ok());
}

TEST_F(CacheErrorTest, MalformedBatches) {
  expectRejected(
      C->append(0, {{A, 1, K.data(), V.data()}, {A, 1, K.data(), V.data()}}),
      "appears twice");
  expectRejected(
      C->append(0, {{A, 1, K.data(), V.data()}, {B, 3, nullptr, V.data()}}),
      "null key or value data");
}

TEST_F(CacheErrorTest, WrongShapes) {
  // 3 tokens of [2][8] f16 are 96 bytes.
  expectRejected(C->append(0, {{A, 1, K.data(), V.data()},
                               {B, 3, K.data(), V.data(), 96, 64}}),
                 "sequence 2: wrong shape: 3 tokens need 96 bytes of keys and "
                 "of values, got 96 and 64");
  std::vector<float> F(3 * kRow);
  expectRejected(C->append(0, std::vector<AppendItemF32>{{A, 3, F.data(),
                                                          F.data(), 47, 48}}),
                 "wrong shape: 3 tokens need 48 floats");
  std::vector<float> Q(kHq * kD - 1), Out;
  expectRejected(C->attendF32(0, {A}, Q, Out),
                 "attend: the query has 31 values, expected 32 (1 x 4 heads "
                 "x 8)");
  Q.push_back(0.5f);
  ASSERT_TRUE(C->attendF32(0, {A}, Q, Out).ok());
  EXPECT_EQ(Out.size(), Q.size());
  ASSERT_TRUE(C->append(0, {{A, 3, K.data(), V.data(), 96, 96}}).ok());
}

TEST_F(CacheErrorTest, PagesExhausted) {
  // A holds 2 pages of each tensor, B none; 6 of 8 are free. 18 more tokens
  // give A 24 quantized keys (6 pages, its table's width) but a batch also
  // giving B 18 tokens needs 4 + 5 more pages.
  expectRejected(
      C->append(0, {{A, 18, K.data(), V.data()}, {B, 18, K.data(), V.data()}}),
      "out of keys pages: the append needs 9 more, 6 are free");
  // 40 tokens to A need 12 key pages; its block table holds 6.
  expectRejected(C->append(0, {{A, 40, K.data(), V.data()}}),
                 "would need 12 keys pages; a sequence may hold 6");
  ASSERT_TRUE(C->append(0, {{A, 14, K.data(), V.data()}}).ok());
}

TEST_F(CacheErrorTest, AttendErrors) {
  std::vector<uint16_t> Q(2 * kHq * kD, 0x3c00);
  std::vector<float> Out(Q.size());
  expectRejected(C->attend(0, {A, 12345}, Q.data(), Out.data()),
                 "unknown sequence 12345");
  expectRejected(C->attend(5, {A}, Q.data(), Out.data()), "out of range");
  expectRejected(C->attend(0, {A}, nullptr, Out.data()), "null query");
  Q[kHq * kD + 9] = 0x7c00;
  expectRejected(C->attend(0, {A, B}, Q.data(), Out.data()),
                 "non-finite query value at query row 1, head 1, "
                 "channel 1");
}

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

TEST(BackendTest, CudaWithoutDriverFailsCleanly) {
  CacheOptions O;
  O.Backend = BackendKind::Cuda;
  Expected<std::unique_ptr<Cache>> C = Cache::create(openMock(), O);
  if (C.ok())
    GTEST_SKIP() << "a CUDA driver is present";
  // The mock has no PTX: with a driver the error is about the PTX instead.
  EXPECT_TRUE(C.message().rfind("no CUDA driver", 0) == 0 ||
              C.message().find("has PTX for no target, none of which the "
                               "device") != std::string::npos)
      << C.message();
}

TEST(BackendTest, DeviceBackendNeedsPTX) {
  std::shared_ptr<const Artifact> A = openMock();
  Expected<std::unique_ptr<Backend>> B =
      createDeviceBackend(*A, nullptr, "sm_80");
  ASSERT_FALSE(B.ok());
  EXPECT_EQ(B.message(), "device backend: no driver");
}

TEST(BackendTest, CpuBackendReportsMissingHostCode) {
  std::shared_ptr<const Artifact> A = openMock();
  Expected<std::unique_ptr<Backend>> B =
      createCpuBackend(*A, 1, HostCode::Linked);
  ASSERT_FALSE(B.ok());
  EXPECT_NE(B.message().find("lacks kernel 'kvq_mock_flush_keys_0'"),
            std::string::npos)
      << B.message();
  Expected<std::unique_ptr<Backend>> Cpu = createCpuBackend(*A, 3);
  ASSERT_TRUE(Cpu.ok()) << Cpu.message();
  EXPECT_EQ((*Cpu)->name(), "cpu (3 threads)");
}

} // namespace
