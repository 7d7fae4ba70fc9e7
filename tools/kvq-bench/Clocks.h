//===- Clocks.h - kvq-bench's clocks and bandwidth yardsticks ----*- C++
//-*-===//
//
// kvq-bench times calls on the backend it benchmarks: the host's wall clock
// for the CPU backend, the GPU's events for the CUDA backend. Each clock
// also measures the yardstick its figures are a percentage of (the host's
// read bandwidth, the device's copy bandwidth) and knows how to make a call
// cold (its data in no cache: the host's last-level cache, the GPU's L2).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TOOLS_KVQ_BENCH_CLOCKS_H
#define KVQ_TOOLS_KVQ_BENCH_CLOCKS_H

#include "kvq/Runtime/DeviceDriver.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvq::bench {

/// Median, minimum and maximum of some timings, in seconds.
struct Timing {
  double median = 0, min = 0, max = 0;
};
Timing summarize(std::vector<double> times);

class Clock {
public:
  virtual ~Clock() = default;
  /// The clock, how cold calls are made, and the yardstick.
  virtual std::string describe() const = 0;
  /// The yardstick, in bytes per second.
  virtual double bandwidth() const = 0;
  /// Seconds of one call whose data no cache holds.
  double cold(const std::function<void()> &call) {
    return coldAfter(nullptr, call);
  }
  /// As cold, with `prepare` run untimed between the eviction and the call:
  /// the previous layer's step of a model, which runs the same code on
  /// other data, so that only the call's own data is cold.
  virtual double coldAfter(const std::function<void()> &prepare,
                           const std::function<void()> &call) = 0;
  /// `repeat` calls in a row, each right after the previous one.
  virtual Timing warm(const std::function<void()> &call, unsigned repeat) = 0;
  /// The stream the calls issue their work on (null on the host).
  virtual runtime::StreamHandle stream() const { return nullptr; }
};

/// The host's wall clock. Cold calls follow a read of `evictBytes` (0: four
/// times the last-level cache) on each of `threads` threads; the yardstick
/// is a STREAM-style sum of `probeBytes` on as many threads.
std::unique_ptr<Clock> createHostClock(unsigned threads, size_t evictBytes,
                                       size_t probeBytes);

/// A clock on the GPU whose driver also holds the inputs the calls read (in
/// the CUDA primary context, which the caches' drivers share).
class DeviceClock : public Clock {
public:
  virtual runtime::DeviceDriver &driver() = 0;
};

/// The GPU's events on a stream of its own (CUDA device 0). Cold calls
/// follow a write of `flushBytes` (several times the L2), which also keeps
/// the GPU busy while the host issues the call, so that the events time
/// the GPU's work alone; warm is the mean of calls issued back to back
/// (launch gaps included, as an engine without graphs sees them). The
/// yardstick is a device-to-device copy of `probeBytes`, counted on the
/// bytes it reads and writes.
runtime::Expected<std::unique_ptr<DeviceClock>>
createDeviceClock(size_t flushBytes, size_t probeBytes);

} // namespace kvq::bench

#endif // KVQ_TOOLS_KVQ_BENCH_CLOCKS_H
