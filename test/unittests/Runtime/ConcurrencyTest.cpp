//===- ConcurrencyTest.cpp - The thread-safety contract -------------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// The contract (docs/Reliability.md): caches on different threads run
// concurrently and may share one Artifact; calls on one cache are
// serialised by the caller; kvq_last_error() is per thread. Each test runs
// the same workload on several threads at once and single-threaded, and
// requires identical results. `tools/bootstrap.sh test` runs this program
// built with ThreadSanitizer (build-tsan/), where any data race fails it.
//
//===----------------------------------------------------------------------===//

#include "MockCache.h"

#include "kvq/kvq.h"

#include <mutex>
#include <thread>

using namespace kvq::runtime;
using namespace kvq::runtime::mock;

namespace {

constexpr unsigned kThreads = 4;

/// What a workload observed: attention outputs and a saved file.
struct Outcome {
  std::vector<float> Attention;
  std::vector<uint8_t> File;
  std::string Error;
  bool operator==(const Outcome &O) const {
    return Attention == O.Attention && File == O.File && Error == O.Error;
  }
};

/// Appends, attends, forks, saves and restores on the sequences of C the
/// workload owns; Lock guards every call on C (null: C is the thread's own).
Outcome workload(Cache &C, unsigned Seed, std::mutex *Lock) {
  auto Locked = [&](auto &&Body) {
    std::unique_lock<std::mutex> Guard;
    if (Lock)
      Guard = std::unique_lock<std::mutex>(*Lock);
    return Body();
  };
  Outcome R;
  std::mt19937 Rng(Seed);
  Expected<SequenceId> S = Locked([&] { return C.addSequence(); });
  if (!S.ok())
    return {{}, {}, S.message()};
  for (unsigned Step = 0; Step < 24; ++Step) {
    unsigned N = Step == 0 ? 9 : 1;
    std::vector<uint16_t> K = randomTokens(Rng, N), V = randomTokens(Rng, N),
                          Q = randomTokens(Rng, 2);
    std::vector<float> Out(kHq * kD);
    for (unsigned L = 0; L < 2; ++L) {
      Status St = Locked([&] {
        Status A = C.append(L, {{*S, N, K.data(), V.data()}});
        return A.ok() ? C.attend(L, {*S}, Q.data(), Out.data()) : A;
      });
      if (!St.ok())
        return {{}, {}, St.message()};
      R.Attention.insert(R.Attention.end(), Out.begin(), Out.end());
    }
  }
  Locked([&] {
    Expected<SequenceId> F = C.forkSequence(*S);
    Expected<std::vector<uint8_t>> File =
        F.ok() ? C.serialize({*F}) : F.status();
    if (!File.ok())
      R.Error = File.message();
    else if (Expected<std::vector<SequenceId>> Ids =
                 C.deserialize(File->data(), File->size());
             Ids.ok())
      R.File = *C.serialize(*Ids);
    else
      R.Error = Ids.message();
  });
  return R;
}

std::unique_ptr<Cache> makeCacheOn(std::shared_ptr<const Artifact> A,
                                   unsigned Seqs) {
  CacheOptions O;
  O.PagesPerTensor = 64;
  O.MaxSequences = Seqs;
  O.Threads = 2; // the backend's pool runs blocks on a second thread
  Expected<std::unique_ptr<Cache>> C = Cache::create(std::move(A), O);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? std::move(*C) : nullptr;
}

TEST(ConcurrencyTest, CachesSharingAnArtifactRunConcurrently) {
  std::shared_ptr<const Artifact> A = openMock();
  ASSERT_TRUE(A);
  std::vector<Outcome> Alone, Together(kThreads);
  for (unsigned I = 0; I < kThreads; ++I)
    Alone.push_back(workload(*makeCacheOn(A, 4), 100 + I, nullptr));
  std::vector<std::thread> Threads;
  for (unsigned I = 0; I < kThreads; ++I)
    Threads.emplace_back([&, I] {
      // Creating and destroying caches is part of the contract too.
      std::unique_ptr<Cache> C = makeCacheOn(A, 4);
      if (C)
        Together[I] = workload(*C, 100 + I, nullptr);
    });
  for (std::thread &T : Threads)
    T.join();
  for (unsigned I = 0; I < kThreads; ++I) {
    EXPECT_EQ(Together[I].Error, "") << "thread " << I;
    EXPECT_FALSE(Together[I].Attention.empty());
    EXPECT_TRUE(Together[I] == Alone[I]) << "thread " << I;
  }
}

TEST(ConcurrencyTest, OneCacheWithCallsSerialisedByTheCaller) {
  std::shared_ptr<const Artifact> A = openMock();
  ASSERT_TRUE(A);
  std::vector<Outcome> Alone, Together(kThreads);
  for (unsigned I = 0; I < kThreads; ++I)
    Alone.push_back(workload(*makeCacheOn(A, 3 * kThreads), 200 + I, nullptr));
  std::unique_ptr<Cache> Shared = makeCacheOn(A, 3 * kThreads);
  ASSERT_TRUE(Shared);
  std::mutex Lock;
  std::vector<std::thread> Threads;
  for (unsigned I = 0; I < kThreads; ++I)
    Threads.emplace_back(
        [&, I] { Together[I] = workload(*Shared, 200 + I, &Lock); });
  for (std::thread &T : Threads)
    T.join();
  for (unsigned I = 0; I < kThreads; ++I) {
    EXPECT_EQ(Together[I].Error, "") << "thread " << I;
    // Saved files carry the saving cache's sequence ids: compare the rest.
    EXPECT_EQ(Together[I].Attention, Alone[I].Attention) << "thread " << I;
    EXPECT_EQ(Together[I].File.size(), Alone[I].File.size());
  }
}

TEST(ConcurrencyTest, CApiErrorsArePerThread) {
  kvq_artifact *A = nullptr;
  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK);
  std::vector<std::string> Seen(kThreads);
  std::vector<std::thread> Threads;
  for (unsigned I = 0; I < kThreads; ++I)
    Threads.emplace_back([&, I] {
      kvq_cache *C = nullptr;
      if (kvq_cache_create(A, nullptr, &C) != KVQ_OK)
        return;
      for (unsigned Round = 0; Round < 50; ++Round) {
        // Each thread fails on its own unknown sequence.
        if (kvq_cache_remove_sequence(C, 1000 + I) != KVQ_OK)
          Seen[I] = kvq_last_error();
        if (Seen[I] != "unknown sequence " + std::to_string(1000 + I))
          break;
      }
      kvq_cache_destroy(C);
    });
  for (std::thread &T : Threads)
    T.join();
  kvq_artifact_close(A);
  for (unsigned I = 0; I < kThreads; ++I)
    EXPECT_EQ(Seen[I], "unknown sequence " + std::to_string(1000 + I));
}

} // namespace
