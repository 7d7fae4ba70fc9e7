//===- AllocationFailureTest.cpp - allocation failures change nothing ----===//
//
// Every host allocation (operator new, replaced in this test program) and
// every backend allocation of one KIVI append (a prefill that flushes keys
// and values, CPU backend) is made to fail in turn. Each failing call must
// return an OutOfMemory status, not throw, and leave the cache byte-for-byte
// as it was; the retry must then give the state of an uninjected run.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

using namespace kvq::runtime;

namespace {
/// The index of the host / backend allocation to fail (-1: none), and the
/// allocations seen since it was armed.
std::atomic<long> HostFailAt{-1}, HostCount{0};
long DeviceFailAt = -1, DeviceCount = 0;
} // namespace

void *operator new(std::size_t Bytes) {
  if (HostFailAt >= 0 && HostCount++ == HostFailAt)
    throw std::bad_alloc();
  if (void *P = std::malloc(Bytes ? Bytes : 1))
    return P;
  throw std::bad_alloc();
}
void operator delete(void *P) noexcept { std::free(P); }
void operator delete(void *P, std::size_t) noexcept { std::free(P); }

namespace {

/// A CPU backend whose allocate() fails at DeviceFailAt.
class FailingBackend : public Backend {
public:
  explicit FailingBackend(std::unique_ptr<Backend> Inner)
      : Inner(std::move(Inner)) {}
  std::string name() const override { return Inner->name(); }
  Expected<DevicePtr> allocate(size_t Bytes) override {
    if (DeviceFailAt >= 0 && DeviceCount++ == DeviceFailAt)
      return Status::error(ErrorCode::OutOfMemory, "injected failure");
    return Inner->allocate(Bytes);
  }
  Status free(DevicePtr P) override { return Inner->free(P); }
  Status copyToDevice(DevicePtr D, const void *S, size_t N) override {
    return Inner->copyToDevice(D, S, N);
  }
  Status copyToHost(void *D, DevicePtr S, size_t N) override {
    return Inner->copyToHost(D, S, N);
  }
  Status copyWithin(DevicePtr D, DevicePtr S, size_t N) override {
    return Inner->copyWithin(D, S, N);
  }
  Status memset(DevicePtr D, uint8_t V, size_t N) override {
    return Inner->memset(D, V, N);
  }
  void setStream(StreamHandle S) override { Inner->setStream(S); }
  Status launch(const std::string &Name, Dim3 Grid, Dim3 Block, unsigned Shared,
                void **Args) override {
    return Inner->launch(Name, Grid, Block, Shared, Args);
  }
  Status synchronize() override { return Inner->synchronize(); }
  Expected<unsigned> residentBlocks(const std::string &Name, Dim3 Block,
                                    unsigned SharedBytes) override {
    return Inner->residentBlocks(Name, Block, SharedBytes);
  }

private:
  std::unique_ptr<Backend> Inner;
};

std::unique_ptr<Cache> makeCache() {
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  EXPECT_TRUE(A.ok()) << A.message();
  auto Cpu = createCpuBackend(**A, 1);
  EXPECT_TRUE(Cpu.ok()) << Cpu.message();
  CacheOptions O;
  O.MaxSequences = 2;
  O.PagesPerTensor = 32;
  auto C =
      Cache::create(*A, O, std::make_unique<FailingBackend>(std::move(*Cpu)));
  EXPECT_TRUE(C.ok()) << C.message();
  return std::move(*C);
}

/// Everything a sequence's state consists of, as bytes.
std::vector<uint8_t> snapshot(Cache &C, SequenceId Seq) {
  std::vector<uint8_t> State;
  auto Add = [&](const std::vector<uint8_t> &Bytes) {
    State.insert(State.end(), Bytes.begin(), Bytes.end());
  };
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    unsigned Pages = *C.numPages(T, Seq);
    State.push_back(uint8_t(Pages));
    State.push_back(uint8_t(C.freePages(T)));
    for (unsigned L = 0; L < 2; ++L) {
      SliceCounts Counts = *C.counts(Seq, L);
      const TensorCounts &N = Counts[T];
      for (unsigned V : {N.Sink, N.Quantized, N.Window})
        Add({uint8_t(V), uint8_t(V >> 8)});
      Add(*C.readWindow(T, Seq, L));
      Add(*C.readSink(T, Seq, L));
      for (unsigned P = 0; P < Pages; ++P)
        for (unsigned H = 0; H < 2; ++H)
          Add(*C.readSlicePage(T, Seq, L, H, P));
    }
  }
  return State;
}

TEST(AllocationFailureTest, FailedAppendsChangeNothing) {
  std::unique_ptr<Cache> Injected = makeCache(), Clean = makeCache();
  SequenceId S = *Injected->addSequence(), R = *Clean->addSequence();
  std::mt19937 Rng(3);
  std::normal_distribution<float> Normal;
  auto Tokens = [&](unsigned N) {
    std::vector<float> X(N * 2 * 64);
    for (float &V : X)
      V = Normal(Rng);
    return X;
  };
  std::vector<float> K0 = Tokens(100), V0 = Tokens(100);
  std::vector<float> K1 = Tokens(1000), V1 = Tokens(1000);
  ASSERT_TRUE(Injected->append(0, {{S, 100, K0.data(), V0.data()}}).ok());
  ASSERT_TRUE(Clean->append(0, {{R, 100, K0.data(), V0.data()}}).ok());
  ASSERT_TRUE(Clean->append(0, {{R, 1000, K1.data(), V1.data()}}).ok());

  // Built before any failure is armed: only the cache's allocations fail.
  const std::vector<AppendItemF32> Batch = {{S, 1000, K1.data(), V1.data()}};
  unsigned Failures[2] = {0, 0};
  // Backend allocations first: the first append grows the staging buffers,
  // which later appends reuse.
  for (bool Device : {true, false}) {
    for (long At = 0;; ++At) {
      std::vector<uint8_t> Before = snapshot(*Injected, S);
      std::vector<AppendItemF32> Items = Batch;
      Items[0].Seq = S;
      if (Device) {
        DeviceCount = 0;
        DeviceFailAt = At;
      } else {
        HostCount = 0;
        HostFailAt = At;
      }
      Status St = Injected->append(0, Items);
      HostFailAt = -1;
      DeviceFailAt = -1;
      if (St.ok())
        break;
      ++Failures[Device];
      EXPECT_EQ(St.code(), ErrorCode::OutOfMemory) << St.message();
      ASSERT_EQ(snapshot(*Injected, S), Before)
          << (Device ? "backend" : "host") << " allocation " << At;
    }
    // The last round succeeded: undo it for the next kind.
    if (Device) {
      ASSERT_TRUE(Injected->removeSequence(S).ok());
      S = *Injected->addSequence();
      ASSERT_TRUE(Injected->append(0, {{S, 100, K0.data(), V0.data()}}).ok());
    }
  }
  // Both kinds of allocation were exercised, and the retry that succeeded
  // left the state of a run without failures.
  EXPECT_GT(Failures[0], 0u);
  EXPECT_GT(Failures[1], 0u);
  EXPECT_EQ(snapshot(*Injected, S), snapshot(*Clean, R));
}

} // namespace
