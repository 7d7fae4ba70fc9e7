//===- ThreadPool.cpp - Fixed pool running parallel-for loops -------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include <algorithm>

using namespace kvq::runtime;

ThreadPool::ThreadPool(unsigned Threads,
                       std::chrono::microseconds SpinForNextJob)
    : SpinForNextJob(SpinForNextJob) {
  try {
    for (unsigned I = 1; I < Threads; ++I)
      Workers.emplace_back([this] { workerLoop(); });
  } catch (...) {
    // Joinable threads must not outlive a constructor that failed.
    stopWorkers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    Stopping = true;
  }
  Wake.notify_all();
  for (std::thread &T : Workers)
    T.join();
}

void ThreadPool::runItems(const std::function<void(uint64_t)> *Body,
                          uint64_t N) {
  if (!Body)
    return;
  // Items are claimed in chunks of about 1/8 of a thread's share (at most
  // 1024): a launch of 10^5 one-token flush blocks would otherwise contend
  // on the shared counter once per block.
  uint64_t Threads = Workers.size() + 1;
  uint64_t Chunk = std::clamp<uint64_t>(N / (8 * Threads), 1, 1024);
  for (uint64_t First = Next.fetch_add(Chunk); First < N;
       First = Next.fetch_add(Chunk))
    for (uint64_t I = First, End = std::min(N, First + Chunk); I < End; ++I)
      (*Body)(I);
}

void ThreadPool::workerLoop() {
  uint64_t Seen = 0;
  std::unique_lock<std::mutex> Lock(Mutex);
  while (true) {
    // Poll a while before sleeping: the next job often follows at once,
    // and a wake costs it ~11 us (ThreadPool.h).
    Lock.unlock();
    for (auto Until = Clock::now() + SpinForNextJob;
         Generation.load() == Seen && !Stopping.load() && Clock::now() < Until;)
      std::this_thread::yield();
    Lock.lock();
    Wake.wait(Lock, [&] { return Stopping || Generation != Seen; });
    if (Stopping)
      return;
    Seen = Generation;
    // Snapshot the job under the lock: a worker waking after the job ended
    // sees none and must not touch the shared counter.
    const std::function<void(uint64_t)> *Body = Job;
    uint64_t N = JobSize;
    ++Busy;
    Lock.unlock();
    runItems(Body, N);
    Lock.lock();
    if (--Busy == 0)
      Done.notify_all();
  }
}

bool ThreadPool::runAlone(const std::function<void(uint64_t)> &Body,
                          uint64_t N) {
  auto Start = Clock::now();
  for (uint64_t Ran = 1, I = Next.fetch_add(1); I < N;
       ++Ran, I = Next.fetch_add(1)) {
    Body(I);
    uint64_t Left = N - std::min(N, Next.load());
    auto Spent = Clock::now() - Start;
    if (Left && (Spent >= kRunAlone || Spent * Left / Ran >= kWorthWaking))
      return true;
  }
  return false;
}

void ThreadPool::waitForWorkers(uint64_t N) {
  auto Finished = [&] { return Busy.load() == 0 && Next.load() >= N; };
  // A worker finishing its last chunk usually takes less than a sleep and
  // a wake would; spin that long before sleeping.
  for (auto Until = Clock::now() + kSpinBeforeSleep;
       !Finished() && Clock::now() < Until;)
    std::this_thread::yield();
  std::unique_lock<std::mutex> Lock(Mutex);
  Done.wait(Lock, Finished);
  Job = nullptr;
  JobSize = 0;
}

void ThreadPool::parallelFor(uint64_t N,
                             const std::function<void(uint64_t)> &Body) {
  if (Workers.empty() || N <= 1) {
    for (uint64_t I = 0; I < N; ++I)
      Body(I);
    return;
  }
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    Job = &Body;
    JobSize = N;
    Next.store(0);
    ++Generation;
  }
  // Work first: a grid of kWakeAtOnce blocks or more wakes the workers
  // now; a smaller one runs on this thread alone and wakes them only when
  // its blocks turn out to be long (a worker awake anyway joins in).
  if (N >= kWakeAtOnce || runAlone(Body, N)) {
    ++Wakes;
    Wake.notify_all();
    runItems(&Body, N);
  }
  // Workers that woke late find no items left and finish at once; wait for
  // every worker of this generation before Body goes out of scope.
  waitForWorkers(N);
}
