//===- kvq-bench.cpp - CPU decode attention benchmark ---------------------===//
//
// Times decode attention on the CPU backend (one sequence, layer 0) for a
// baseline artifact and one or more compiled specs at several context
// lengths, and measures the machine's read bandwidth in the same run
// (STREAM-style, same thread count), so that every number is a ratio taken
// side by side:
//
//   kvq-bench [--contexts 1024,4096,...] [--threads N] [--repeat N]
//             BASELINE_ARTIFACT SPEC_ARTIFACT...
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kvq::runtime;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<unsigned> contexts = {1024, 2048, 4096, 8192, 16384, 32768};
  unsigned threads = 2;
  unsigned repeat = 20;
  std::vector<std::string> artifacts;
};

/// One artifact's timings, per context.
struct Series {
  std::string name;
  std::vector<double> seconds, bytes;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "kvq-bench: %s\n", message.c_str());
  std::exit(1);
}

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail("missing value for " + arg);
      return argv[++i];
    };
    if (arg == "--contexts") {
      options.contexts.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');)
        options.contexts.push_back(std::stoul(item));
      std::sort(options.contexts.begin(), options.contexts.end());
    } else if (arg == "--threads") {
      options.threads = std::stoul(value());
    } else if (arg == "--repeat") {
      options.repeat = std::stoul(value());
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: kvq-bench [--contexts N,N,...] [--threads N] "
                  "[--repeat N] BASELINE_ARTIFACT SPEC_ARTIFACT...\n");
      std::exit(0);
    } else {
      options.artifacts.push_back(arg);
    }
  }
  if (options.artifacts.size() < 2 || options.contexts.empty())
    fail("need a baseline artifact, at least one spec artifact and contexts "
         "(--help)");
  return options;
}

/// Read bandwidth in bytes/s: `threads` threads summing disjoint halves of a
/// buffer far larger than the caches; the best of several passes.
double measureReadBandwidth(unsigned threads) {
  constexpr size_t kFloats = size_t(256) << 20; // 1 GiB
  std::vector<float> buffer(kFloats, 1.0f);
  std::vector<double> sums(threads);
  double best = 0.0;
  for (int pass = 0; pass < 5; ++pass) {
    auto start = Clock::now();
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        size_t begin = kFloats / threads * t, end = begin + kFloats / threads;
        float acc[16] = {};
        for (size_t i = begin; i < end; i += 16)
          for (int j = 0; j < 16; ++j)
            acc[j] += buffer[i + j];
        double total = 0;
        for (float a : acc)
          total += a;
        sums[t] = total;
      });
    for (std::thread &worker : workers)
      worker.join();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, kFloats * sizeof(float) / seconds);
  }
  if (sums[0] <= 0)
    fail("bandwidth probe was optimised away");
  return best;
}

/// Appends random tokens up to each context and times layer 0's attention.
Series runArtifact(const std::string &dir, const Options &options) {
  auto artifact = Artifact::open(dir);
  if (!artifact.ok())
    fail(artifact.message());
  const Manifest &manifest = (*artifact)->manifest();
  const ModelShape &model = manifest.Model;
  unsigned maxContext = options.contexts.back();
  CacheOptions cacheOptions;
  cacheOptions.MaxSequences = 1;
  cacheOptions.PagesPerTensor = maxContext / manifest.PageTokens + 2;
  cacheOptions.Threads = options.threads;
  auto cache = Cache::create(*artifact, cacheOptions);
  if (!cache.ok())
    fail(cache.message());
  auto seq = (*cache)->addSequence();
  if (!seq.ok())
    fail(seq.message());

  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  size_t row = size_t(model.KvHeads) * model.HeadDim;
  std::vector<float> q(size_t(model.Heads) * model.HeadDim);
  for (float &x : q)
    x = normal(rng);
  std::vector<float> out(q.size());

  Series series;
  series.name = manifest.Name;
  unsigned tokens = 0;
  for (unsigned context : options.contexts) {
    unsigned n = context - tokens;
    std::vector<float> k(n * row), v(n * row);
    for (float &x : k)
      x = normal(rng);
    for (float &x : v)
      x = normal(rng);
    if (Status s = (*cache)->append(0, {{*seq, n, k.data(), v.data()}});
        !s.ok())
      fail(s.message());
    tokens = context;
    std::vector<double> times;
    for (unsigned r = 0; r < options.repeat + 2; ++r) {
      auto start = Clock::now();
      if (Status s = (*cache)->attendF32(0, {*seq}, q.data(), out.data());
          !s.ok())
        fail(s.message());
      times.push_back(
          std::chrono::duration<double>(Clock::now() - start).count());
    }
    // Two warm-up calls, then the median.
    times.erase(times.begin(), times.begin() + 2);
    std::nth_element(times.begin(), times.begin() + times.size() / 2,
                     times.end());
    MemoryStats stats = (*cache)->memoryStats();
    series.seconds.push_back(times[times.size() / 2]);
    series.bytes.push_back(
        double(stats.PageBytes + stats.WindowBytes + stats.SinkBytes));
  }
  return series;
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  double bandwidth = measureReadBandwidth(options.threads);
  std::printf("kvq-bench: CPU decode attention, layer 0, 1 sequence, %u "
              "threads\n",
              options.threads);
  std::printf("machine read bandwidth (%u threads, STREAM-style sum): "
              "%.2f GB/s\n\n",
              options.threads, bandwidth / 1e9);
  std::vector<Series> series;
  for (const std::string &dir : options.artifacts)
    series.push_back(runArtifact(dir, options));

  std::printf("%-18s %8s %10s %12s %9s %8s\n", "cache", "context", "time (ms)",
              "read (GB/s)", "% of bw", "speedup");
  for (size_t c = 0; c < options.contexts.size(); ++c) {
    for (const Series &s : series) {
      double gbps = s.bytes[c] / s.seconds[c] / 1e9;
      std::printf("%-18s %8u %10.3f %12.2f %8.1f%% %7.2fx\n", s.name.c_str(),
                  options.contexts[c], s.seconds[c] * 1e3, gbps,
                  100.0 * gbps * 1e9 / bandwidth,
                  series[0].seconds[c] / s.seconds[c]);
    }
    std::printf("\n");
  }
  return 0;
}
