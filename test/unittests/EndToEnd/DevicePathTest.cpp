//===- DevicePathTest.cpp - Device-pointer calls equal host calls ---------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// For specs covering sinks, key norms, both spans, hybrid mode and
// cross-layer code sharing, on the PTX interpreter-backed device: a prefill,
// a fork (copy-on-write on the device) and decode steps through
// appendDevice / attendDevice with a plan give the same outputs, windows,
// sinks, pages and key norms, bit for bit, as the host-pointer calls (whose
// results EndToEndTests check against the reference). Where the machine has
// a GPU, the same on it, the device-pointer calls issued on a stream of the
// test's own (non-blocking, as an engine's).
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <random>

using namespace kvq;
using namespace kvq::runtime;

namespace {

struct Spec {
  const char *Name;
  const char *Dir;
};

std::ostream &operator<<(std::ostream &OS, const Spec &S) {
  return OS << S.Name;
}

std::unique_ptr<Cache> deviceCache(const char *Dir,
                                   std::unique_ptr<DeviceDriver> Driver) {
  auto A = Artifact::open(Dir);
  EXPECT_TRUE(A.ok()) << A.message();
  auto B = createDeviceBackend(**A, std::move(Driver));
  EXPECT_TRUE(B.ok()) << B.message();
  CacheOptions O;
  O.MaxSequences = 3;
  O.PagesPerTensor = 16;
  auto C = Cache::create(*A, O, std::move(*B));
  EXPECT_TRUE(C.ok()) << C.message();
  return std::move(*C);
}

/// N random model-dtype values in [-2, 2).
std::vector<uint8_t> randomValues(DType Type, size_t N, unsigned Seed) {
  std::mt19937 Rng(Seed);
  std::uniform_real_distribution<float> Dist(-2.0f, 2.0f);
  std::vector<float> F(N);
  for (float &X : F)
    X = Dist(Rng);
  std::vector<uint8_t> Raw(N * byteSize(Type));
  convertFromF32(Type, F.data(), N, Raw.data());
  return Raw;
}

/// Two caches on one kind of device fed the same tokens, one through the
/// device-pointer calls, one through the host-pointer calls.
class DevicePathTest : public ::testing::TestWithParam<Spec> {
protected:
  void SetUp() override {
    Dev = deviceCache(GetParam().Dir, std::make_unique<ptx::InterpDriver>());
    Host = deviceCache(GetParam().Dir, std::make_unique<ptx::InterpDriver>());
    shapes();
  }
  void TearDown() override {
    if (StreamOwner)
      (void)StreamOwner->destroyStream(Stream);
  }

  /// Makes both caches CUDA caches and the device calls' stream one of the
  /// test's own; false without a GPU.
  bool onCuda(std::string &Why) {
    auto Probe = createCudaDriver();
    if (!Probe.ok()) {
      Why = Probe.message();
      return false;
    }
    Dev = deviceCache(GetParam().Dir, std::move(*createCudaDriver()));
    Host = deviceCache(GetParam().Dir, std::move(*createCudaDriver()));
    StreamOwner = std::move(*Probe);
    Expected<StreamHandle> S = StreamOwner->createStream();
    EXPECT_TRUE(S.ok()) << S.message();
    Stream = S.ok() ? *S : nullptr;
    shapes();
    return Dev && Host;
  }

  void shapes() {
    const ModelShape &M = Dev->manifest().Model;
    Row = size_t(M.KvHeads) * M.HeadDim;
    QRow = size_t(M.Heads) * M.HeadDim;
    Type = M.Type;
  }

  /// Device memory holding Data (freed with the cache's backend). The
  /// copy is on the default stream: waited for, so that work on Stream
  /// sees it.
  DevicePtr onDevice(const std::vector<uint8_t> &Data) {
    Backend &B = Dev->backend();
    DevicePtr P = *B.allocate(Data.size());
    EXPECT_TRUE(B.copyToDevice(P, Data.data(), Data.size()).ok());
    EXPECT_TRUE(B.synchronize().ok());
    return P;
  }

  /// Appends Tokens[i] tokens to Seqs[i] in every layer, in both caches.
  void append(const std::vector<unsigned> &Tokens, unsigned Seed) {
    for (unsigned L = 0; L < Dev->manifest().Model.Layers; ++L) {
      std::vector<std::vector<uint8_t>> Data;
      std::vector<AppendItem> HostItems;
      std::vector<DeviceAppendItem> DevItems;
      for (size_t I = 0; I < Seqs.size(); ++I) {
        Data.push_back(randomValues(Type, Tokens[I] * Row, Seed + 7 * I + L));
        Data.push_back(
            randomValues(Type, Tokens[I] * Row, Seed + 7 * I + L + 100));
        const std::vector<uint8_t> &K = Data[Data.size() - 2];
        const std::vector<uint8_t> &V = Data.back();
        HostItems.push_back({Seqs[I], Tokens[I], K.data(), V.data()});
        DevItems.push_back({Seqs[I], Tokens[I], onDevice(K), onDevice(V)});
      }
      ASSERT_TRUE(Host->append(L, HostItems).ok());
      ASSERT_TRUE(Dev->appendDevice(L, DevItems, Stream).ok());
    }
  }

  /// Attends every layer in both caches and compares the outputs.
  void attendAndCompare(const AttendPlan &Plan, unsigned Seed) {
    for (unsigned L = 0; L < Dev->manifest().Model.Layers; ++L) {
      std::vector<uint8_t> Q = randomValues(Type, Seqs.size() * QRow, Seed);
      std::vector<float> Want(Seqs.size() * QRow), Out(Want.size());
      ASSERT_TRUE(Host->attend(L, Seqs, Q.data(), Want.data()).ok());
      DevicePtr OutDev = *Dev->backend().allocate(Out.size() * 4);
      ASSERT_TRUE(Dev->attendDevice(L, Plan, onDevice(Q), OutDev, Stream).ok());
      ASSERT_TRUE(Dev->synchronize(Stream).ok());
      ASSERT_TRUE(
          Dev->backend().copyToHost(Out.data(), OutDev, Out.size() * 4).ok());
      EXPECT_EQ(Out, Want) << "layer " << L;
    }
  }

  /// Every piece of state of every sequence, bit for bit.
  void compareState() {
    ASSERT_TRUE(Dev->synchronize(Stream).ok());
    const Manifest &M = Dev->manifest();
    for (size_t I = 0; I < Seqs.size(); ++I)
      for (unsigned L = 0; L < M.Model.Layers; ++L) {
        EXPECT_EQ(*Dev->readKeyNorms(Seqs[I], L),
                  *Host->readKeyNorms(Seqs[I], L));
        for (Tensor T : {Tensor::Keys, Tensor::Values}) {
          EXPECT_EQ(*Dev->readWindow(T, Seqs[I], L),
                    *Host->readWindow(T, Seqs[I], L));
          EXPECT_EQ(*Dev->readSink(T, Seqs[I], L),
                    *Host->readSink(T, Seqs[I], L));
          unsigned Pages = *Dev->numPages(T, Seqs[I]);
          ASSERT_EQ(Pages, *Host->numPages(T, Seqs[I]));
          for (unsigned P = 0; P < Pages; ++P)
            for (unsigned H = 0; H < M.Model.KvHeads; ++H)
              EXPECT_EQ(*Dev->readSlicePage(T, Seqs[I], L, H, P),
                        *Host->readSlicePage(T, Seqs[I], L, H, P))
                  << toString(T) << " seq " << I << " layer " << L << " page "
                  << P;
        }
      }
  }

  std::unique_ptr<Cache> Dev, Host;
  /// The device calls' stream (null: the default one) and its driver.
  std::unique_ptr<DeviceDriver> StreamOwner;
  StreamHandle Stream = nullptr;
  std::vector<SequenceId> Seqs;
  size_t Row = 0, QRow = 0;
  DType Type = DType::F16;

  /// A prefill, a fork and decode steps, each followed by attention.
  void prefillForkAndDecode() {
    for (int I = 0; I < 2; ++I) {
      SequenceId S = *Dev->addSequence();
      ASSERT_EQ(S, *Host->addSequence());
      Seqs.push_back(S);
    }
    append({200, 150}, 1);
    // The fork shares the first sequence's pages; the decode steps below
    // write into them (copy-on-write, on the device).
    SequenceId Fork = *Dev->forkSequence(Seqs[0]);
    ASSERT_EQ(Fork, *Host->forkSequence(Seqs[0]));
    Seqs.push_back(Fork);
    Expected<AttendPlan> Plan = Dev->planAttend(Seqs, 256);
    ASSERT_TRUE(Plan.ok()) << Plan.message();
    for (unsigned Step = 0; Step < 3; ++Step) {
      append({1, 1, 1}, 10 + Step);
      attendAndCompare(*Plan, 20 + Step);
    }
    compareState();
  }
};

TEST_P(DevicePathTest, DeviceCallsEqualHostCalls) { prefillForkAndDecode(); }

TEST_P(DevicePathTest, DeviceCallsEqualHostCallsOnCuda) {
  std::string Why;
  if (!onCuda(Why))
    GTEST_SKIP() << Why;
  prefillForkAndDecode();
}

/// A compiled artifact has one PTX, for its oldest chip, which every chip
/// of its target loads.
TEST(PtxTargetTest, OnePtxServesEveryChip) {
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  ASSERT_TRUE(A.ok()) << A.message();
  ASSERT_EQ((*A)->ptxTargets(), (std::vector<std::string>{"sm_80"}));
  for (unsigned Sm : {80u, 90u, 120u}) {
    Expected<std::string> T = choosePtxTarget(**A, Sm);
    ASSERT_TRUE(T.ok()) << T.message();
    EXPECT_EQ(*T, "sm_80");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, DevicePathTest,
    ::testing::Values(
        Spec{"kivi2_d64_gqa1", KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1},
        Spec{"innerq_hybrid_d64_gqa1",
             KVQ_ARTIFACT_DIR_E2E_INNERQ_HYBRID_D64_GQA1},
        Spec{"innerq_base_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA4},
        Spec{"xquant_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_XQUANT_D64_GQA4}),
    [](const ::testing::TestParamInfo<Spec> &I) { return I.param.Name; });

} // namespace
