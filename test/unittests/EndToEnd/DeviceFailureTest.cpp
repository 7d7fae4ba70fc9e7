//===- DeviceFailureTest.cpp - A device failing in the middle of an append ===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// On a device backend (the PTX interpreter behind a driver that fails one
// chosen launch), a launch that fails after an append has begun writing a
// sequence used to return the device's OutOfMemory, which promises an
// unchanged cache, with the sequence's keys appended and its values not:
// the next attend read past the values. Now the append returns a Backend
// error, the sequences it had begun are broken (every call naming them
// fails, changing nothing, until they are removed, which gives back their
// pages) and the batch's other sequences are unchanged and usable.
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <map>
#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

/// The interpreter, failing the Nth launch of a kernel whose name contains
/// FailKernel with OutOfMemory (as cuLaunchKernel can).
class FailingLaunchDriver : public ptx::InterpDriver {
public:
  FailingLaunchDriver(std::string FailKernel, unsigned FailAt)
      : FailKernel(std::move(FailKernel)), FailAt(FailAt) {}

  Expected<KernelHandle> getKernel(ModuleHandle Module,
                                   const std::string &Name) override {
    Expected<KernelHandle> K = InterpDriver::getKernel(Module, Name);
    if (K.ok())
      Names[K->Id] = Name;
    return K;
  }
  Status launch(KernelHandle Kernel, Dim3 Grid, Dim3 Block, unsigned Shared,
                void **Args) override {
    if (Names[Kernel.Id].find(FailKernel) != std::string::npos &&
        Seen++ == FailAt)
      return Status::error(ErrorCode::OutOfMemory, "injected launch failure");
    return InterpDriver::launch(Kernel, Grid, Block, Shared, Args);
  }

private:
  std::map<uint64_t, std::string> Names;
  std::string FailKernel;
  unsigned FailAt, Seen = 0;
};

std::unique_ptr<Cache> makeCache(std::string FailKernel, unsigned FailAt) {
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  EXPECT_TRUE(A.ok()) << A.message();
  auto B = createDeviceBackend(
      **A, std::make_unique<FailingLaunchDriver>(std::move(FailKernel), FailAt),
      "sm_80");
  EXPECT_TRUE(B.ok()) << B.message();
  CacheOptions O;
  O.MaxSequences = 3;
  O.PagesPerTensor = 8;
  auto C = Cache::create(*A, O, std::move(*B));
  EXPECT_TRUE(C.ok()) << C.message();
  return std::move(*C);
}

std::vector<float> randomFloats(size_t N, unsigned Seed) {
  std::mt19937 Rng(Seed);
  std::uniform_real_distribution<float> Dist(-2.0f, 2.0f);
  std::vector<float> F(N);
  for (float &X : F)
    X = Dist(Rng);
  return F;
}

/// Expects every call naming Seq to fail with the broken-sequence error.
void expectBroken(Cache &C, SequenceId Seq) {
  const ModelShape &M = C.manifest().Model;
  std::string Broken = "sequence " + std::to_string(Seq) + " is broken";
  std::vector<float> K = randomFloats(M.KvHeads * M.HeadDim, 7);
  std::vector<float> Q = randomFloats(M.Heads * M.HeadDim, 8), Out;
  Status Calls[] = {
      C.counts(Seq, 0).status(),
      C.readWindow(Tensor::Values, Seq, 0).status(),
      C.append(0, {{Seq, 1, K.data(), K.data()}}),
      C.attendF32(0, {Seq}, Q, Out),
      C.forkSequence(Seq).status(),
      C.serialize({Seq}).status(),
      C.planAttend({Seq}, 512).status(),
  };
  for (const Status &S : Calls) {
    EXPECT_EQ(S.code(), ErrorCode::InvalidArgument) << S.message();
    EXPECT_NE(S.message().find(Broken), std::string::npos) << S.message();
  }
}

TEST(DeviceFailureTest, AFailedLaunchBreaksTheSequencesItBegan) {
  // A prefill of 300 tokens flushes 256 keys and 171 values: the values'
  // flush of the second item fails, after its keys were flushed and
  // committed.
  std::unique_ptr<Cache> C = makeCache("flush_values", 1);
  const ModelShape &M = C->manifest().Model;
  unsigned FreeKeys = C->freePages(Tensor::Keys),
           FreeValues = C->freePages(Tensor::Values);
  SequenceId S0 = *C->addSequence(), S1 = *C->addSequence(),
             S2 = *C->addSequence();
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  std::vector<float> K = randomFloats(300 * Row, 1),
                     V = randomFloats(300 * Row, 2);
  std::vector<float> K2 = randomFloats(300 * Row, 3);
  Status St = C->append(0, {{S0, 300, K.data(), V.data()},
                            {S1, 300, K2.data(), V.data()},
                            {S2, 300, K.data(), K2.data()}});
  ASSERT_FALSE(St.ok());
  // Not OutOfMemory: that code promises an unchanged cache.
  EXPECT_EQ(St.code(), ErrorCode::Backend) << St.message();
  EXPECT_NE(St.message().find("injected launch failure"), std::string::npos)
      << St.message();
  EXPECT_NE(St.message().find("sequences " + std::to_string(S0) + ", " +
                              std::to_string(S1) + " are now broken"),
            std::string::npos)
      << St.message();
  EXPECT_NE(St.message().find("other sequences are unchanged"),
            std::string::npos)
      << St.message();
  expectBroken(*C, S0);
  expectBroken(*C, S1);
  // The item after the failure is untouched, and the cache still works.
  SliceCounts Counts = *C->counts(S2, 0);
  EXPECT_EQ(Counts.Keys.total(), 0u);
  EXPECT_EQ(Counts.Values.total(), 0u);
  ASSERT_TRUE(C->append(0, {{S2, 300, K.data(), K2.data()}}).ok());
  Counts = *C->counts(S2, 0);
  EXPECT_EQ(Counts.Keys.total(), 300u);
  EXPECT_EQ(Counts.Values.total(), 300u);
  std::vector<float> Q = randomFloats(M.Heads * M.HeadDim, 4), Out;
  ASSERT_TRUE(C->attendF32(0, {S2}, Q, Out).ok());
  // Removing the broken sequences gives back their pages.
  ASSERT_TRUE(C->removeSequence(S0).ok());
  ASSERT_TRUE(C->removeSequence(S1).ok());
  ASSERT_TRUE(C->removeSequence(S2).ok());
  EXPECT_EQ(C->freePages(Tensor::Keys), FreeKeys);
  EXPECT_EQ(C->freePages(Tensor::Values), FreeValues);
  EXPECT_FALSE(C->hasSequence(S0));
}

// A failure of the first item's first launch breaks that sequence alone.
TEST(DeviceFailureTest, AFailedFirstLaunchBreaksOneSequence) {
  std::unique_ptr<Cache> C = makeCache("flush_keys", 0);
  const ModelShape &M = C->manifest().Model;
  SequenceId S0 = *C->addSequence(), S1 = *C->addSequence();
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  std::vector<float> K = randomFloats(200 * Row, 5);
  Status St = C->append(
      1, {{S0, 200, K.data(), K.data()}, {S1, 200, K.data(), K.data()}});
  EXPECT_EQ(St.code(), ErrorCode::Backend) << St.message();
  EXPECT_NE(
      St.message().find("sequence " + std::to_string(S0) + " is now broken"),
      std::string::npos)
      << St.message();
  expectBroken(*C, S0);
  EXPECT_EQ(C->counts(S1, 1)->Keys.total(), 0u);
  ASSERT_TRUE(C->append(1, {{S1, 200, K.data(), K.data()}}).ok());
}

} // namespace
