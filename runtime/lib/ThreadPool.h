//===- ThreadPool.h - Fixed pool running parallel-for loops -----*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The CPU backend runs the blocks of a grid on a few persistent threads. The
// calling thread takes part, so a pool of N threads starts N - 1 workers.
// It also starts alone: waking a sleeping worker costs more than the small
// grids of a decode step's appends take in all (docs/Performance.md,
// "Small launches on the calling thread"). A worker that has just run a job
// polls for the next a while before it sleeps, so grids launched back to
// back (a flushing decode step's) share the workers without wakes.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_LIB_THREADPOOL_H
#define KVQ_RUNTIME_LIB_THREADPOOL_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvq::runtime {

class ThreadPool {
public:
  /// Starts Threads - 1 workers, which poll for SpinForNextJob after each
  /// job before they sleep. Throws std::system_error if a thread cannot be
  /// started, after stopping the ones that were.
  explicit ThreadPool(
      unsigned Threads,
      std::chrono::microseconds SpinForNextJob = kSpinForNextJob);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return unsigned(Workers.size()) + 1; }
  /// How many jobs have woken the workers so far.
  uint64_t wakes() const { return Wakes.load(); }

  /// Calls Body(I) for every I in [0, N), in any order, and returns when all
  /// calls have returned. Not reentrant.
  void parallelFor(uint64_t N, const std::function<void(uint64_t)> &Body);

  /// Grids of this many blocks or more wake the workers at once.
  static constexpr uint64_t kWakeAtOnce = 64;
  /// A smaller grid runs on the calling thread alone until it has taken
  /// kRunAlone or its blocks left would take kWorthWaking at the pace of
  /// those it ran. On the 2-vCPU VM of docs/Performance.md a wake costs the
  /// caller about 7 us and the worker starts about 4 us after it, more than
  /// a decode step's appends of one token take in all.
  static constexpr std::chrono::microseconds kRunAlone{20};
  static constexpr std::chrono::microseconds kWorthWaking{30};
  /// How long a caller whose blocks are done polls for a worker's last ones
  /// before it sleeps.
  static constexpr std::chrono::microseconds kSpinBeforeSleep{20};
  /// How long a worker whose job is done polls (yielding its core) for the
  /// next before it sleeps, by default: a decode step's appends and
  /// attention launch grids back to back, and each would pay a wake.
  static constexpr std::chrono::microseconds kSpinForNextJob{200};

private:
  void workerLoop();
  using Clock = std::chrono::steady_clock;
  /// Runs items of the current job on this thread until none is left
  /// (false) or the rest is worth waking the workers for (true).
  bool runAlone(const std::function<void(uint64_t)> &Body, uint64_t N);
  /// Returns when every item of the current job has run.
  void waitForWorkers(uint64_t N);
  void stopWorkers();
  void runItems(const std::function<void(uint64_t)> *Body, uint64_t N);

  const std::chrono::microseconds SpinForNextJob;
  std::vector<std::thread> Workers;
  std::mutex Mutex;
  std::condition_variable Wake;
  std::condition_variable Done;
  /// Bumped under Mutex for every job; spinning workers read it without.
  std::atomic<uint64_t> Generation{0};
  /// Set under Mutex; polling workers read it without.
  std::atomic<bool> Stopping{false};
  /// Workers inside the current job (changed under Mutex).
  std::atomic<unsigned> Busy{0};
  const std::function<void(uint64_t)> *Job = nullptr;
  uint64_t JobSize = 0;
  std::atomic<uint64_t> Next{0};
  std::atomic<uint64_t> Wakes{0};
};

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_LIB_THREADPOOL_H
