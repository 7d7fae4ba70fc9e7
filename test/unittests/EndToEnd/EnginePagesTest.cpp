//===- EnginePagesTest.cpp - Pages assigned by the engine's allocator -----===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// PageAllocator::Engine on the PTX interpreter-backed device: the engine
// owns the page pools and hands each sequence its pages (CSR block tables,
// FlashInfer-style). The cache must then store every slice exactly where
// docs/KernelABI.md ("Page layout") says, in the engine's pages, and attend
// exactly as a cache allocating its own pages; bad tables and appends that
// outrun them change nothing.
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

constexpr unsigned kSeqs = 2, kPages = 8;

struct EngineCache {
  std::unique_ptr<Cache> C;
  std::vector<SequenceId> Seqs;
  DevicePtr Pool[2] = {0, 0};
};

/// A cache on the interpreter; with Engine, over page pools allocated
/// outside it, as an engine would.
EngineCache makeCache(bool Engine) {
  EngineCache E;
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  EXPECT_TRUE(A.ok()) << A.message();
  auto B =
      createDeviceBackend(**A, std::make_unique<ptx::InterpDriver>(), "sm_80");
  EXPECT_TRUE(B.ok()) << B.message();
  CacheOptions O;
  O.MaxSequences = kSeqs;
  O.PagesPerTensor = kPages;
  if (Engine) {
    O.Allocator = PageAllocator::Engine;
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      size_t Bytes = kPages * (*A)->manifest().tensor(T).PageBytes;
      E.Pool[int(T)] = *(*B)->allocate(Bytes);
      // Stale data: the cache must clear a page before its first flush.
      EXPECT_TRUE((*B)->memset(E.Pool[int(T)], 0xa5, Bytes).ok());
      O.EnginePagePools[int(T)] = E.Pool[int(T)];
    }
  }
  auto C = Cache::create(*A, O, std::move(*B));
  EXPECT_TRUE(C.ok()) << C.message();
  E.C = std::move(*C);
  for (unsigned I = 0; I < kSeqs; ++I)
    E.Seqs.push_back(*E.C->addSequence());
  return E;
}

std::vector<float> randomFloats(size_t N, unsigned Seed) {
  std::mt19937 Rng(Seed);
  std::uniform_real_distribution<float> Dist(-2.0f, 2.0f);
  std::vector<float> F(N);
  for (float &X : F)
    X = Dist(Rng);
  return F;
}

size_t rowFloats(const Cache &C) {
  return size_t(C.manifest().Model.KvHeads) * C.manifest().Model.HeadDim;
}

/// Appends Tokens random tokens to both layers of every sequence.
Status appendAll(EngineCache &E, unsigned Tokens, unsigned Seed) {
  for (unsigned L = 0; L < 2; ++L) {
    std::vector<std::vector<float>> Data;
    std::vector<AppendItemF32> Items;
    for (unsigned I = 0; I < kSeqs; ++I) {
      Data.push_back(randomFloats(Tokens * rowFloats(*E.C), Seed + I));
      Items.push_back(
          {E.Seqs[I], Tokens, Data.back().data(), Data.back().data()});
    }
    // Data's buffers do not move when it grows: they are heap blocks.
    if (Status S = E.C->append(L, Items); !S.ok())
      return S;
  }
  return Status::success();
}

std::vector<float> attendAll(EngineCache &E, unsigned Layer, unsigned Seed) {
  const ModelShape &M = E.C->manifest().Model;
  std::vector<float> Q = randomFloats(kSeqs * M.Heads * M.HeadDim, Seed), Out;
  EXPECT_TRUE(E.C->attendF32(Layer, E.Seqs, Q, Out).ok());
  return Out;
}

/// The engine's pages, scattered over the pool: sequence 0 gets 7, 2, 5,
/// sequence 1 gets 0, 6, 3.
const uint32_t kIndptr[] = {0, 3, 6};
const uint32_t kIndices[] = {7, 2, 5, 0, 6, 3};

TEST(EnginePagesTest, SlicesLandInTheEnginesPagesAsDocumented) {
  EngineCache Engine = makeCache(/*Engine=*/true);
  EngineCache Own = makeCache(/*Engine=*/false);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    ASSERT_TRUE(
        Engine.C->setBlockTables(T, Engine.Seqs, kIndptr, kIndices).ok());
  EXPECT_EQ(Engine.C->freePages(Tensor::Keys), kPages - 6);
  // 300 tokens: two key pages and one value page written per sequence.
  for (EngineCache *E : {&Engine, &Own}) {
    ASSERT_TRUE(appendAll(*E, 250, 1).ok());
    ASSERT_TRUE(appendAll(*E, 50, 3).ok());
  }
  for (unsigned L = 0; L < 2; ++L)
    EXPECT_EQ(attendAll(Engine, L, 9), attendAll(Own, L, 9)) << L;

  Backend &B = Engine.C->backend();
  const Manifest &M = Engine.C->manifest();
  for (unsigned I = 0; I < kSeqs; ++I)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      unsigned Pages = *Engine.C->numPages(T, Engine.Seqs[I]);
      EXPECT_EQ(Pages, 2u);
      for (unsigned P = 0; P < Pages; ++P)
        for (unsigned L = 0; L < 2; ++L)
          for (unsigned H = 0; H < M.Model.KvHeads; ++H) {
            const TensorLayout &TL = M.tensor(T);
            const LayerLayout &LL = TL.Layers[L];
            // docs/KernelABI.md: slice (l, h) of physical page p starts at
            // p * page_bytes + layerOffset[l] + h * sliceBytes[l].
            uint32_t Physical = kIndices[kIndptr[I] + P];
            std::vector<uint8_t> InPool(LL.Slice.SliceBytes);
            ASSERT_TRUE(
                B.copyToHost(InPool.data(),
                             Engine.Pool[int(T)] + Physical * TL.PageBytes +
                                 LL.Slice.Offset + H * LL.Slice.SliceBytes,
                             LL.Slice.SliceBytes)
                    .ok());
            EXPECT_EQ(InPool,
                      *Engine.C->readSlicePage(T, Engine.Seqs[I], L, H, P));
            EXPECT_EQ(InPool, *Own.C->readSlicePage(T, Own.Seqs[I], L, H, P));
          }
    }
  // Removing a sequence gives its pages, written or assigned, back.
  ASSERT_TRUE(Engine.C->removeSequence(Engine.Seqs[0]).ok());
  EXPECT_EQ(Engine.C->freePages(Tensor::Keys), kPages - 3);
}

TEST(EnginePagesTest, BadTablesAndUnassignedPagesChangeNothing) {
  EngineCache E = makeCache(/*Engine=*/true);
  SequenceId S0 = E.Seqs[0], S1 = E.Seqs[1];
  // No page assigned: a prefill that flushes is refused, nothing changes.
  Status St = appendAll(E, 300, 1);
  EXPECT_EQ(St.code(), ErrorCode::Capacity);
  EXPECT_NE(St.message().find("the engine has assigned it 0"),
            std::string::npos)
      << St.message();
  EXPECT_EQ(E.C->counts(S0, 0)->Keys.total(), 0u);

  ASSERT_TRUE(E.C->setBlockTable(Tensor::Keys, S0, {4, 1, 2}).ok());
  ASSERT_TRUE(E.C->setBlockTable(Tensor::Values, S0, {4, 0}).ok());
  auto Refused = [&](Tensor T, SequenceId S, std::vector<uint32_t> Row,
                     const char *Why) {
    Status R = E.C->setBlockTable(T, S, Row);
    EXPECT_EQ(R.code(), ErrorCode::InvalidArgument) << Why;
    EXPECT_NE(R.message().find(Why), std::string::npos) << R.message();
  };
  Refused(Tensor::Keys, S1, {kPages}, "out of range");
  Refused(Tensor::Keys, S1, {3, 3}, "given twice");
  Refused(Tensor::Keys, S1, {1}, "held by another sequence");
  Refused(Tensor::Keys, S1, std::vector<uint32_t>(kPages + 1, 0),
          "a sequence may hold");
  // A batch is checked whole: the first row is fine, the second is not.
  const uint32_t Indptr[] = {0, 1, 2}, Indices[] = {5, kPages};
  EXPECT_EQ(E.C->setBlockTables(Tensor::Keys, {S1, S0}, Indptr, Indices).code(),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(E.C->freePages(Tensor::Keys), kPages - 3);

  // Sequence 0 flushes into page 4; its row must keep it first.
  std::vector<float> K = randomFloats(300 * rowFloats(*E.C), 5);
  ASSERT_TRUE(E.C->append(0, {{S0, 300, K.data(), K.data()}}).ok());
  EXPECT_EQ(*E.C->numPages(Tensor::Keys, S0), 2u);
  Refused(Tensor::Keys, S0, {1, 4}, "must begin with the 2 pages");
  // Dropping the unwritten page 2 frees it for sequence 1.
  ASSERT_TRUE(E.C->setBlockTable(Tensor::Keys, S0, {4, 1}).ok());
  EXPECT_TRUE(E.C->setBlockTable(Tensor::Keys, S1, {2}).ok());

  // Forks and restores would take pages themselves.
  EXPECT_EQ(E.C->forkSequence(S0).status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(E.C->deserialize(nullptr, 0).status().code(),
            ErrorCode::Unsupported);
  // A cache with its own allocator takes no tables.
  EngineCache Own = makeCache(/*Engine=*/false);
  EXPECT_EQ(Own.C->setBlockTable(Tensor::Keys, Own.Seqs[0], {1}).code(),
            ErrorCode::InvalidArgument);
}

// A pool off the 16-byte alignment was accepted, and the first append's
// flush crashed (SIGSEGV) on the CPU. It is refused before anything is
// allocated; a pool 16 bytes past a wider alignment works.
TEST(EnginePagesTest, MisalignedPagePoolsAreRefused) {
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  ASSERT_TRUE(A.ok()) << A.message();
  size_t Bytes[2];
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    Bytes[int(T)] = kPages * (*A)->manifest().tensor(T).PageBytes;
  // One host block per tensor, 256-byte aligned, with room for the offset.
  std::vector<std::unique_ptr<void, decltype(&std::free)>> Blocks;
  for (size_t B : Bytes)
    Blocks.emplace_back(std::aligned_alloc(256, (B + 256 + 255) / 256 * 256),
                        &std::free);
  auto Options = [&](uintptr_t Offset, Tensor Misaligned) {
    CacheOptions O;
    O.MaxSequences = kSeqs;
    O.PagesPerTensor = kPages;
    O.Threads = 1;
    O.Allocator = PageAllocator::Engine;
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      O.EnginePagePools[int(T)] =
          reinterpret_cast<uintptr_t>(Blocks[int(T)].get()) +
          (T == Misaligned ? Offset : 16);
    return O;
  };
  for (uintptr_t Offset : {1, 4, 8, 24})
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      auto C = Cache::create(*A, Options(Offset, T));
      ASSERT_FALSE(C.ok());
      EXPECT_EQ(C.status().code(), ErrorCode::InvalidArgument);
      EXPECT_NE(C.message().find(std::string("the engine's ") + toString(T) +
                                 " page pool"),
                std::string::npos)
          << C.message();
      EXPECT_NE(C.message().find("is not 16-byte aligned"), std::string::npos)
          << C.message();
    }
  // Aligned to 16 bytes only: appends and attention run on the CPU.
  auto C = Cache::create(*A, Options(16, Tensor::Keys));
  ASSERT_TRUE(C.ok()) << C.message();
  EngineCache E;
  E.C = std::move(*C);
  for (unsigned I = 0; I < kSeqs; ++I)
    E.Seqs.push_back(*E.C->addSequence());
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    ASSERT_TRUE(E.C->setBlockTables(T, E.Seqs, kIndptr, kIndices).ok());
  ASSERT_TRUE(appendAll(E, 300, 5).ok());
  for (unsigned L = 0; L < 2; ++L)
    for (float X : attendAll(E, L, 9))
      ASSERT_TRUE(std::isfinite(X));
  E.C.reset();
}

} // namespace
