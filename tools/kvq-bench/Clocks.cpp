//===- Clocks.cpp - kvq-bench's clocks and bandwidth yardsticks -----------===//

#include "Clocks.h"
#include "DotRate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

using namespace kvq;
using namespace kvq::bench;
using runtime::DevicePtr;
using runtime::EventHandle;
using runtime::Expected;
using runtime::Status;

Timing kvq::bench::summarize(std::vector<double> times) {
  if (times.empty())
    return {};
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), times.back()};
}

namespace {

using WallClock = std::chrono::steady_clock;

/// printf into a string (a line or two of the bench's header).
template <typename... Args>
std::string format(const char *pattern, Args... args) {
  char text[512];
  std::snprintf(text, sizeof(text), pattern, args...);
  return text;
}

double secondsSince(WallClock::time_point start) {
  return std::chrono::duration<double>(WallClock::now() - start).count();
}

/// Sums every `stride`-th float of `data` over `threads` threads, each
/// asking for the line `prefetchBytes` ahead (none at 0); returns the sum so
/// that the reads are not optimised away.
double parallelSum(const float *data, size_t floats, unsigned threads,
                   size_t stride, size_t prefetchBytes = 0) {
  std::vector<double> sums(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      size_t begin = floats / threads * t, end = begin + floats / threads;
      float acc[16] = {};
      for (size_t i = begin; i + 16 * stride <= end; i += 16 * stride) {
        if (prefetchBytes)
          __builtin_prefetch(reinterpret_cast<const char *>(data + i) +
                             prefetchBytes);
        for (int j = 0; j < 16; ++j)
          acc[j] += data[i + j * stride];
      }
      double total = 0;
      for (float a : acc)
        total += a;
      sums[t] = total;
    });
  for (std::thread &worker : workers)
    worker.join();
  double total = 0;
  for (double s : sums)
    total += s;
  return total;
}

/// The last-level cache's size from sysfs (32 MiB when unknown).
size_t lastLevelCacheBytes() {
  std::ifstream file("/sys/devices/system/cpu/cpu0/cache/index3/size");
  size_t size = 0;
  std::string unit;
  if (file >> size && size > 0) {
    file >> unit;
    return size << (unit == "M" ? 20 : unit == "K" ? 10 : 0);
  }
  return size_t(32) << 20;
}

class HostClock : public Clock {
public:
  HostClock(unsigned threads, size_t evictBytes, size_t probeBytes)
      : threads(threads),
        evictBuffer((evictBytes ? evictBytes : 4 * lastLevelCacheBytes()) /
                        sizeof(float),
                    1.0f),
        readBandwidth(measureReadBandwidth(probeBytes)) {}

  std::string describe() const override {
    std::string dots = "host dot rate: no AVX-512 VNNI";
    if (std::optional<DotRate> rate = measureDotRate())
      dots = format("host dot rate (one core, 512-bit, 16 accumulators): "
                    "vpdpwssd %.2f, vpdpbusd %.2f per cycle at %.2f GHz",
                    rate->pairDotsPerCycle, rate->quadDotsPerCycle,
                    rate->hertz / 1e9);
    return format("CPU backend, %u threads; cold calls follow a read of %zu "
                  "MiB on every thread (LLC %zu MiB)\nmachine read bandwidth "
                  "(%u threads, STREAM-style sum, best with and without "
                  "prefetch): %.2f GB/s\n%s",
                  threads, (evictBuffer.size() * sizeof(float)) >> 20,
                  lastLevelCacheBytes() >> 20, threads, readBandwidth / 1e9,
                  dots.c_str());
  }
  double bandwidth() const override { return readBandwidth; }
  double coldAfter(const std::function<void()> &prepare,
                   const std::function<void()> &call) override {
    // Reads every line on every thread, so that neither L3 nor the
    // threads' L2 still holds the previous call's data.
    sink += parallelSum(evictBuffer.data(), evictBuffer.size(), threads,
                        64 / sizeof(float));
    if (prepare)
      prepare();
    auto start = WallClock::now();
    call();
    return secondsSince(start);
  }
  Timing warm(const std::function<void()> &call, unsigned repeat) override {
    std::vector<double> times;
    for (unsigned r = 0; r < repeat; ++r) {
      auto start = WallClock::now();
      call();
      times.push_back(secondsSince(start));
    }
    return summarize(times);
  }

private:
  /// The best of several passes of `threads` threads summing disjoint
  /// parts of a buffer far larger than the caches, alternately with and
  /// without software prefetch 8 KiB ahead. The kernels prefetch a page
  /// ahead; on some hosts (an Intel Xeon guest: 11.5 GB/s plain, 19-20 GB/s
  /// prefetching 8-64 KiB ahead) the hardware prefetchers alone keep too
  /// few lines in flight, and a plain sum is no yardstick.
  double measureReadBandwidth(size_t bytes) const {
    constexpr size_t kPrefetchBytes = 8 << 10;
    std::vector<float> buffer(bytes / sizeof(float), 1.0f);
    double best = 0.0, total = 0.0;
    for (int pass = 0; pass < 6; ++pass) {
      auto start = WallClock::now();
      total += parallelSum(buffer.data(), buffer.size(), threads, 1,
                           pass % 2 ? kPrefetchBytes : 0);
      best =
          std::max(best, buffer.size() * sizeof(float) / secondsSince(start));
    }
    if (total <= 0) {
      std::fprintf(stderr, "kvq-bench: bandwidth probe was optimised away\n");
      std::exit(1);
    }
    return best;
  }

  unsigned threads;
  std::vector<float> evictBuffer;
  double readBandwidth;
  double sink = 0;
};

[[noreturn]] void fail(const Status &status) {
  std::fprintf(stderr, "kvq-bench: %s\n", status.message().c_str());
  std::exit(1);
}

template <typename T> T take(Expected<T> value) {
  if (!value.ok())
    fail(value.status());
  return std::move(*value);
}

void check(const Status &status) {
  if (!status.ok())
    fail(status);
}

class CudaClock : public DeviceClock {
public:
  CudaClock(std::unique_ptr<runtime::DeviceDriver> owned, size_t flushBytes)
      : device(std::move(owned)), flushBytes(flushBytes) {
    calls = take(device->createStream());
    device->setStream(calls);
    start = take(device->createEvent());
    end = take(device->createEvent());
    flushBuffer = take(device->allocate(flushBytes));
  }
  ~CudaClock() override {
    (void)device->synchronize();
    (void)device->free(flushBuffer);
    (void)device->destroyEvent(start);
    (void)device->destroyEvent(end);
    device->setStream(nullptr);
    (void)device->destroyStream(calls);
  }

  runtime::DeviceDriver &driver() override { return *device; }
  runtime::StreamHandle stream() const override { return calls; }

  std::string describe() const override {
    return format("CUDA backend (%s), timed by events; cold calls follow a "
                  "write of %zu MiB\ndevice copy bandwidth (read + write): "
                  "%.0f GB/s",
                  device->name().c_str(), flushBytes >> 20,
                  copyBandwidth / 1e9);
  }
  double bandwidth() const override { return copyBandwidth; }

  double coldAfter(const std::function<void()> &prepare,
                   const std::function<void()> &call) override {
    flush();
    if (prepare)
      prepare();
    return between([&] { call(); });
  }
  Timing warm(const std::function<void()> &call, unsigned repeat) override {
    double seconds = between([&] {
      for (unsigned r = 0; r < repeat; ++r)
        call();
    });
    double each = seconds / repeat;
    return {each, each, each};
  }

  /// The best of several copies of `bytes` within the device.
  void measureCopyBandwidth(size_t bytes) {
    DevicePtr buffer = take(device->allocate(2 * bytes));
    for (int pass = 0; pass < 5; ++pass) {
      double seconds = between(
          [&] { check(device->copyWithin(buffer + bytes, buffer, bytes)); });
      copyBandwidth = std::max(copyBandwidth, 2.0 * bytes / seconds);
    }
    check(device->free(buffer));
  }

private:
  void flush() { check(device->memset(flushBuffer, 0, flushBytes)); }

  /// Device seconds between events recorded before and after `issue`.
  double between(const std::function<void()> &issue) {
    check(device->recordEvent(start));
    issue();
    check(device->recordEvent(end));
    return take(device->elapsedSeconds(start, end));
  }

  std::unique_ptr<runtime::DeviceDriver> device;
  size_t flushBytes;
  runtime::StreamHandle calls = nullptr;
  EventHandle start = nullptr, end = nullptr;
  DevicePtr flushBuffer = 0;
  double copyBandwidth = 0;
};

} // namespace

std::unique_ptr<Clock> kvq::bench::createHostClock(unsigned threads,
                                                   size_t evictBytes,
                                                   size_t probeBytes) {
  return std::make_unique<HostClock>(threads, evictBytes, probeBytes);
}

Expected<std::unique_ptr<DeviceClock>>
kvq::bench::createDeviceClock(size_t flushBytes, size_t probeBytes) {
  Expected<std::unique_ptr<runtime::DeviceDriver>> driver =
      runtime::createCudaDriver();
  if (!driver.ok())
    return driver.status();
  // The clock needs the driver's events before it makes any.
  if (Expected<EventHandle> probe = (*driver)->createEvent(); !probe.ok())
    return probe.status();
  else
    check((*driver)->destroyEvent(*probe));
  auto clock = std::make_unique<CudaClock>(std::move(*driver), flushBytes);
  clock->measureCopyBandwidth(probeBytes);
  return std::unique_ptr<DeviceClock>(std::move(clock));
}
