//===- ThreadPool.h - Fixed pool running parallel-for loops -----*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The CPU backend runs the blocks of a grid on a few persistent threads. The
// calling thread takes part, so a pool of N threads starts N - 1 workers.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_LIB_THREADPOOL_H
#define KVQ_RUNTIME_LIB_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvq::runtime {

class ThreadPool {
public:
  /// Starts Threads - 1 workers. Throws std::system_error if a thread
  /// cannot be started, after stopping the ones that were.
  explicit ThreadPool(unsigned Threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return unsigned(Workers.size()) + 1; }

  /// Calls Body(I) for every I in [0, N), in any order, and returns when all
  /// calls have returned. Not reentrant.
  void parallelFor(uint64_t N, const std::function<void(uint64_t)> &Body);

private:
  void workerLoop();
  void stopWorkers();
  void runItems(const std::function<void(uint64_t)> *Body, uint64_t N);

  std::vector<std::thread> Workers;
  std::mutex Mutex;
  std::condition_variable Wake;
  std::condition_variable Done;
  uint64_t Generation = 0;
  bool Stopping = false;
  unsigned Busy = 0;
  const std::function<void(uint64_t)> *Job = nullptr;
  uint64_t JobSize = 0;
  std::atomic<uint64_t> Next{0};
};

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_LIB_THREADPOOL_H
