//===- ThreadPoolTest.cpp - The CPU backend's thread pool -----------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// Every block of a grid runs once whatever the pool decides; small grids of
// short blocks stay on the calling thread (a wake costs more than they
// take); grids of long blocks, and large grids, wake the workers. Built
// into ConcurrencyTests, so ThreadSanitizer checks the pool too.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

using namespace kvq::runtime;

namespace {

TEST(ThreadPoolTest, RunsEveryItemOnce) {
  ThreadPool Pool(3);
  for (uint64_t N : {0, 1, 2, 3, 8, 63, 64, 65, 1000, 5000}) {
    std::vector<std::atomic<unsigned>> Runs(N);
    Pool.parallelFor(N, [&](uint64_t I) { ++Runs[I]; });
    for (uint64_t I = 0; I < N; ++I)
      ASSERT_EQ(Runs[I].load(), 1u) << "item " << I << " of " << N;
  }
}

TEST(ThreadPoolTest, ShortSmallGridsStayOnTheCallingThread) {
  // A worker that never polls for jobs, so that only a wake brings it in
  // (a polling one joins small grids too, and under ThreadSanitizer takes
  // half their blocks; see AWorkerFreshFromAJobJoinsTheNextUnwoken).
  ThreadPool Pool(2, std::chrono::microseconds(0));
  constexpr unsigned kGrids = 100;
  std::atomic<unsigned> OnCaller{0}, Total{0};
  std::thread::id Caller = std::this_thread::get_id();
  for (unsigned G = 0; G < kGrids; ++G)
    Pool.parallelFor(8, [&](uint64_t) {
      ++Total;
      OnCaller += std::this_thread::get_id() == Caller;
    });
  EXPECT_EQ(Total.load(), 8 * kGrids);
  // Each grid takes well under a microsecond; one preempted for longer than
  // kRunAlone may wake the worker, but not all of them.
  EXPECT_LT(Pool.wakes(), kGrids / 2);
  EXPECT_GT(OnCaller.load(), 8 * kGrids / 2);
}

TEST(ThreadPoolTest, LongBlocksWakeTheWorkers) {
  ThreadPool Pool(2);
  std::mutex M;
  std::set<std::thread::id> Threads;
  Pool.parallelFor(16, [&](uint64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> Lock(M);
    Threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(Pool.wakes(), 1u);
  EXPECT_EQ(Threads.size(), 2u);
}

TEST(ThreadPoolTest, LargeGridsWakeTheWorkersAtOnce) {
  ThreadPool Pool(2);
  std::atomic<unsigned> Total{0};
  Pool.parallelFor(ThreadPool::kWakeAtOnce, [&](uint64_t) { ++Total; });
  EXPECT_EQ(Total.load(), ThreadPool::kWakeAtOnce);
  EXPECT_EQ(Pool.wakes(), 1u);
}

TEST(ThreadPoolTest, AWorkerFreshFromAJobJoinsTheNextUnwoken) {
  // After a job a worker polls for the next before it sleeps (here for up
  // to 10 s, which no loaded machine outwaits), so a small grid started
  // meanwhile takes it in without a wake. Blocks on the calling thread wait
  // (2 s at most a grid) for a block to run on the worker: the first grid
  // wakes it and returns when it is done with its blocks; the second must
  // not wake it.
  ThreadPool Pool(2, std::chrono::seconds(10));
  std::thread::id Caller = std::this_thread::get_id();
  std::atomic<bool> OnWorker{false};
  std::chrono::steady_clock::time_point Until;
  auto Block = [&](uint64_t) {
    if (std::this_thread::get_id() != Caller) {
      OnWorker = true;
      return;
    }
    while (!OnWorker && std::chrono::steady_clock::now() < Until)
      std::this_thread::yield();
  };
  Until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  Pool.parallelFor(ThreadPool::kWakeAtOnce, Block);
  ASSERT_TRUE(OnWorker);
  ASSERT_EQ(Pool.wakes(), 1u);
  // Long enough for a worker that does not poll to be asleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  OnWorker = false;
  Until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  Pool.parallelFor(2, Block);
  EXPECT_TRUE(OnWorker);
  EXPECT_EQ(Pool.wakes(), 1u);
}

} // namespace
