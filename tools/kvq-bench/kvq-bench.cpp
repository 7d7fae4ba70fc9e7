//===- kvq-bench.cpp - Decode attention and append benchmark --------------===//
//
// Times layer 0 of a baseline artifact and one or more compiled specs on the
// CPU backend (or, with --device cuda, on a GPU), side by side in one run,
// and measures the machine's bandwidth in the same run (Clocks.h: the
// host's STREAM-style read bandwidth on as many threads, or the GPU's
// device-to-device copy), so that every figure is a ratio taken under the
// same machine load:
//
//   - decode attention at each context length and batch size, cold (the
//     last-level cache evicted before every call, as in a model whose other
//     layers pass through the cache between two calls of this one) and warm
//     (back-to-back calls: at small contexts the whole cache fits in L3 and
//     the warm figure overstates bandwidth); bandwidth is counted on the
//     bytes the call must read (pages, window, sink, norms);
//   - append: a prefill of the longest context into one layer of a fresh
//     sequence, and single-token decode-step appends, in particular the step
//     that triggers the largest flush: cold (each step after an eviction: its
//     code and metadata come from DRAM too), with only its data cold (after
//     the eviction the same step runs on a second sequence first, as a
//     model's previous layer runs the same code on its own data), and warm;
//     bandwidth is counted on the bytes it must read and write (input
//     tokens, flushed window tokens, their codes). `--steps 0` measures the
//     prefill alone.
//
//   kvq-bench [--contexts N,...] [--batches N,...] [--threads N]
//             [--repeat N] [--steps N] [--evict-mib N] [--probe-mib N]
//             [--split-tokens N] [--device cpu|cuda]
//             [--gpu-model [--profile N]] BASELINE_ARTIFACT SPEC_ARTIFACT...
//
// --device cuda runs the caches on CUDA device 0 (the PTX target each
// artifact has that the GPU loads best, choosePtxTarget), their tokens and
// queries in device memory and the calls issued on a stream, timed by
// events: cold calls after a write of --evict-mib (default 512) MiB that
// flushes the L2, warm ones back to back. --probe-mib sizes the copy that
// measures the device's bandwidth.
//
// --split-tokens pins attention's split size (planAttend); by default the
// runtime plans it per batch for the backend (docs/KernelABI.md, "Splits").
//
// --gpu-model replaces the CPU timings by a model of the attention kernels
// on an H200, counted on the PTX interpreter (GpuModel.h); --profile N
// lists each kernel's N basic blocks with the most warp instructions, and
// each one's share of the load waits.
//
//===----------------------------------------------------------------------===//

#include "Clocks.h"
#include "GpuModel.h"

#include "kvq/Runtime/Runtime.h"
#include "kvq/Support/Float.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kvq::runtime;
using kvq::bench::Clock;
using kvq::bench::DeviceClock;
using kvq::bench::Timing;

namespace {

struct Options {
  std::vector<unsigned> contexts = {4096, 32768};
  std::vector<unsigned> batches = {1, 8};
  unsigned threads = 2;
  unsigned repeat = 10;
  /// Single-token appends timed after the longest context.
  unsigned steps = 256;
  /// Bytes read between two cold calls; 0: four times the L3.
  size_t evictBytes = 0;
  /// Size of the bandwidth probe's buffer.
  size_t probeBytes = size_t(1) << 30;
  /// Model the GPU kernels on the interpreter instead of timing the CPU.
  bool gpuModel = false;
  /// Hottest PTX blocks listed per kernel of the model (0: none).
  unsigned profileBlocks = 0;
  /// Attention's split size, pinned for every batch (0: the runtime plans
  /// it for the batch and the backend).
  unsigned splitTokens = 0;
  /// The backend timed: "cpu" or "cuda".
  std::string device = "cpu";
  std::vector<std::string> artifacts;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "kvq-bench: %s\n", message.c_str());
  std::exit(1);
}

void check(const Status &status) {
  if (!status.ok())
    fail(status.message());
}

template <typename T> T take(Expected<T> value) {
  if (!value.ok())
    fail(value.message());
  return std::move(*value);
}

std::vector<unsigned> parseList(const std::string &text) {
  std::vector<unsigned> list;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    list.push_back(std::stoul(item));
  std::sort(list.begin(), list.end());
  return list;
}

/// --help: what is timed, and every option with its default.
void printHelp() {
  std::printf(
      "usage: kvq-bench [options] BASELINE_ARTIFACT SPEC_ARTIFACT...\n"
      "\n"
      "Times layer 0 of a baseline artifact and of each spec artifact side by\n"
      "side on one backend, with the machine's bandwidth measured in the same\n"
      "run: decode attention at each context and batch, cold (last-level\n"
      "cache evicted before each call) and warm (back to back), then a\n"
      "prefill of the longest context and single-token decode-step appends.\n"
      "Figures are times and shares of the measured bandwidth\n"
      "(docs/Performance.md).\n"
      "\n"
      "options:\n"
      "  --contexts N,...    context lengths in tokens (default 4096,32768)\n"
      "  --batches N,...     sequences per attention call (default 1,8)\n"
      "  --threads N         CPU backend threads (default 2)\n"
      "  --repeat N          timed calls per figure (default 10)\n"
      "  --steps N           decode-step appends timed after the longest\n"
      "                      context; 0 times the prefill alone (default 256)\n"
      "  --evict-mib N       MiB read (CPU) or written (CUDA) between two\n"
      "                      cold calls (default: 4 x the L3 on the CPU,\n"
      "                      512 on CUDA)\n"
      "  --probe-mib N       size of the bandwidth probe's buffer (default\n"
      "                      1024)\n"
      "  --split-tokens N    pins attention's split size (default 0: the\n"
      "                      runtime plans it per batch and backend)\n"
      "  --device cpu|cuda   the backend timed (default cpu); cuda: device 0,\n"
      "                      calls on a stream timed by CUDA events\n"
      "  --gpu-model         instead of CPU timings, a model of the GPU\n"
      "                      kernels on an H200 (issue, bytes, latency),\n"
      "                      counted on the PTX interpreter\n"
      "  --profile N         with --gpu-model: each kernel's N hottest basic\n"
      "                      blocks and their share of the load waits\n"
      "                      (default 0)\n"
      "  -h, --help          this help\n"
      "\n"
      "`ninja -C build kvq-bench-run` builds the shipped benchmark specs\n"
      "(tools/kvq-bench/specs) and runs kvq-bench on them.\n");
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
      options.contexts = parseList(value());
    } else if (arg == "--batches") {
      options.batches = parseList(value());
    } else if (arg == "--threads") {
      options.threads = std::stoul(value());
    } else if (arg == "--repeat") {
      options.repeat = std::stoul(value());
    } else if (arg == "--steps") {
      options.steps = std::stoul(value());
    } else if (arg == "--evict-mib") {
      options.evictBytes = size_t(std::stoul(value())) << 20;
    } else if (arg == "--probe-mib") {
      options.probeBytes = size_t(std::stoul(value())) << 20;
    } else if (arg == "--gpu-model") {
      options.gpuModel = true;
    } else if (arg == "--profile") {
      options.profileBlocks = std::stoul(value());
    } else if (arg == "--split-tokens") {
      options.splitTokens = std::stoul(value());
    } else if (arg == "--device") {
      options.device = value();
    } else if (arg == "--help" || arg == "-h") {
      printHelp();
      std::exit(0);
    } else {
      options.artifacts.push_back(arg);
    }
  }
  if (options.artifacts.size() < 2 || options.contexts.empty() ||
      options.batches.empty() || options.threads == 0 || options.repeat == 0)
    fail("need a baseline artifact, at least one spec artifact, contexts, "
         "batches, threads and repeats (--help)");
  if (options.contexts.front() == 0 || options.batches.front() == 0)
    fail("contexts and batches must be positive");
  if (options.profileBlocks && !options.gpuModel)
    fail("--profile needs --gpu-model");
  if (options.device != "cpu" && options.device != "cuda")
    fail("--device must be cpu or cuda, not '" + options.device + "'");
  if (options.gpuModel && options.device != "cpu")
    fail("--gpu-model runs on the PTX interpreter, not --device " +
         options.device);
  return options;
}

/// Random keys and values in the model dtype, [tokens][Hkv][D] each.
struct TokenPool {
  size_t row = 0;
  unsigned elementBytes = 2;
  std::vector<uint8_t> k, v;
  const uint8_t *keys(unsigned token) const {
    return k.data() + size_t(token) * row * elementBytes;
  }
  const uint8_t *values(unsigned token) const {
    return v.data() + size_t(token) * row * elementBytes;
  }
};

void fillRandom(std::vector<uint8_t> &bytes, size_t count, DType type,
                std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bytes.resize(count * (type == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < count; ++i) {
    float x = normal(rng);
    if (type == DType::F32) {
      std::memcpy(&bytes[4 * i], &x, 4);
      continue;
    }
    uint16_t bits =
        type == DType::BF16 ? kvq::fp::floatToBF16(x) : kvq::fp::floatToHalf(x);
    std::memcpy(&bytes[2 * i], &bits, 2);
  }
}

TokenPool makeTokenPool(const ModelShape &model, unsigned tokens) {
  std::mt19937 rng(42);
  TokenPool pool;
  pool.row = size_t(model.KvHeads) * model.HeadDim;
  pool.elementBytes = model.Type == DType::F32 ? 4 : 2;
  fillRandom(pool.k, tokens * pool.row, model.Type, rng);
  fillRandom(pool.v, tokens * pool.row, model.Type, rng);
  return pool;
}

std::vector<uint8_t> makeQueries(const ModelShape &model, unsigned batch) {
  std::mt19937 rng(7);
  std::vector<uint8_t> q;
  fillRandom(q, size_t(batch) * model.Heads * model.HeadDim, model.Type, rng);
  return q;
}

/// Attention of one (artifact, batch, context).
struct AttendResult {
  Timing cold, warm;
  double bytes = 0;
};

/// How a decode step finds the caches.
enum class Heat {
  /// After an eviction of the last-level cache: code, metadata and data
  /// come from DRAM.
  Cold,
  /// After the eviction and the same step on another sequence: only the
  /// step's own data comes from DRAM.
  DataCold,
  /// Right after the previous step.
  Warm,
};

/// Decode-step appends of one heat.
struct StepResult {
  /// Every step, and the steps that flushed the most tokens.
  Timing step, flushStep;
  double flushBytes = 0;
  unsigned flushTokens = 0, flushSteps = 0;
};

/// Decode-step appends and the prefill of one artifact.
struct AppendResult {
  Timing prefill;
  double prefillBytes = 0;
  /// By Heat.
  StepResult steps[3];
};

struct Series {
  std::string name;
  /// [batch][context]
  std::vector<std::vector<AttendResult>> attend;
  AppendResult append;
};

std::unique_ptr<Cache> makeCache(std::shared_ptr<const Artifact> artifact,
                                 const Options &options, unsigned sequences,
                                 unsigned tokens) {
  CacheOptions cacheOptions;
  cacheOptions.Backend =
      options.device == "cuda" ? BackendKind::Cuda : BackendKind::Cpu;
  cacheOptions.MaxSequences = sequences;
  unsigned perSequence = tokens / artifact->manifest().PageTokens + 2;
  cacheOptions.PagesPerTensor = sequences * perSequence;
  cacheOptions.MaxPagesPerSequence = perSequence;
  cacheOptions.Threads = options.threads;
  return take(Cache::create(artifact, cacheOptions));
}

/// Bytes an attention call must read: every page in use, the windows, the
/// sinks and the key norms.
double attendBytes(const Cache &cache) {
  MemoryStats stats = cache.memoryStats();
  return double(stats.PageBytes + stats.WindowBytes + stats.SinkBytes +
                stats.NormBytes);
}

/// Device memory of the bench's own, freed with it.
class DeviceBuffer {
public:
  DeviceBuffer(DeviceDriver &driver, size_t bytes)
      : driver(driver), address(take(driver.allocate(bytes))) {}
  DeviceBuffer(DeviceDriver &driver, const std::vector<uint8_t> &bytes)
      : DeviceBuffer(driver, bytes.size()) {
    check(driver.copyToDevice(address, bytes.data(), bytes.size()));
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { (void)driver.free(address); }
  DevicePtr get() const { return address; }

private:
  DeviceDriver &driver;
  DevicePtr address;
};

/// Where the calls run and how they are timed: the CPU backend on the
/// host's clock, or the CUDA backend on the GPU's, its inputs (tokens,
/// queries) in device memory as an engine's are.
struct Bench {
  const Options &options;
  /// Null where nothing is timed (--gpu-model).
  Clock *clock = nullptr;
  /// The CUDA backend's clock; null on the CPU.
  DeviceClock *device = nullptr;
  TokenPool pool;
  std::unique_ptr<DeviceBuffer> deviceKeys, deviceValues;

  /// Makes the pool hold tokens of `model`'s shape, keeping it when it does.
  void usePool(const ModelShape &model) {
    if (pool.row == size_t(model.KvHeads) * model.HeadDim &&
        pool.elementBytes == (model.Type == DType::F32 ? 4u : 2u))
      return;
    pool = makeTokenPool(model, options.contexts.back());
    if (device) {
      deviceKeys = std::make_unique<DeviceBuffer>(device->driver(), pool.k);
      deviceValues = std::make_unique<DeviceBuffer>(device->driver(), pool.v);
    }
  }

  /// Appends the pool's tokens [first, first + count) to each of `seqs` in
  /// one call to layer 0.
  void append(Cache &cache, const std::vector<SequenceId> &seqs, unsigned first,
              unsigned count) {
    if (!device) {
      std::vector<AppendItem> items;
      for (SequenceId seq : seqs)
        items.push_back({seq, count, pool.keys(first), pool.values(first)});
      check(cache.append(0, items));
      return;
    }
    size_t offset = size_t(first) * pool.row * pool.elementBytes;
    std::vector<DeviceAppendItem> items;
    for (SequenceId seq : seqs)
      items.push_back({seq, count, deviceKeys->get() + offset,
                       deviceValues->get() + offset});
    check(cache.appendDevice(0, items, clock->stream()));
  }
};

AttendResult timeAttend(Bench &bench, Cache &cache,
                        const std::vector<SequenceId> &seqs,
                        const std::vector<uint8_t> &q) {
  const ModelShape &model = cache.manifest().Model;
  std::vector<float> out(seqs.size() * model.Heads * model.HeadDim);
  // Planned once, as an engine would; the plan's split is the runtime's
  // choice unless pinned.
  AttendPlan plan = take(cache.planAttend(seqs, 0, bench.options.splitTokens));
  std::function<void()> call = [&] {
    check(cache.attend(0, plan, q.data(), out.data()));
  };
  std::unique_ptr<DeviceBuffer> deviceQ, deviceOut;
  if (bench.device) {
    DeviceDriver &driver = bench.device->driver();
    deviceQ = std::make_unique<DeviceBuffer>(driver, q);
    deviceOut = std::make_unique<DeviceBuffer>(driver, out.size() * 4);
    call = [&] {
      check(cache.attendDevice(0, plan, deviceQ->get(), deviceOut->get(),
                               bench.clock->stream()));
    };
  }
  call(); // Warm-up: page faults, lazily bound symbols, module loads.
  std::vector<double> cold;
  for (unsigned r = 0; r < bench.options.repeat; ++r)
    cold.push_back(bench.clock->cold(call));
  Timing warm = bench.clock->warm(call, bench.options.repeat);
  if (bench.device)
    check(bench.device->driver().copyToHost(out.data(), deviceOut->get(),
                                            out.size() * 4));
  for (float x : out)
    if (!std::isfinite(x))
      fail("attention of " + cache.manifest().Name + " is not finite");
  return {kvq::bench::summarize(cold), warm, attendBytes(cache)};
}

/// Grows `batch` sequences through every context and calls
/// `atContext(cache, seqs, queries, context)` at each.
template <typename Fn>
void growThroughContexts(Bench &bench, std::shared_ptr<const Artifact> artifact,
                         unsigned batch, Fn atContext) {
  const Options &options = bench.options;
  auto cache = makeCache(artifact, options, batch, options.contexts.back());
  std::vector<SequenceId> seqs;
  for (unsigned b = 0; b < batch; ++b)
    seqs.push_back(take(cache->addSequence()));
  std::vector<uint8_t> q = makeQueries(artifact->manifest().Model, batch);
  unsigned tokens = 0;
  for (unsigned context : options.contexts) {
    bench.append(*cache, seqs, tokens, context - tokens);
    tokens = context;
    atContext(*cache, seqs, q, context);
  }
}

/// Times attention at every context.
std::vector<AttendResult> runAttend(Bench &bench,
                                    std::shared_ptr<const Artifact> artifact,
                                    unsigned batch) {
  std::vector<AttendResult> results;
  growThroughContexts(bench, artifact, batch,
                      [&](Cache &cache, const std::vector<SequenceId> &seqs,
                          const std::vector<uint8_t> &q, unsigned) {
                        results.push_back(timeAttend(bench, cache, seqs, q));
                      });
  return results;
}

/// Prints the GPU model of attention at every context.
void runGpuModel(Bench &bench, std::shared_ptr<const Artifact> artifact,
                 const std::string &name, unsigned batch) {
  const Options &options = bench.options;
  const ModelShape &model = artifact->manifest().Model;
  growThroughContexts(
      bench, artifact, batch,
      [&](Cache &cache, const std::vector<SequenceId> &seqs,
          const std::vector<uint8_t> &q, unsigned context) {
        double elements = 2.0 * context * batch * model.KvHeads * model.HeadDim;
        auto result = take(kvq::bench::modelAttend(
            artifact, cache, seqs, q, attendBytes(cache), elements,
            options.splitTokens, options.profileBlocks > 0));
        kvq::bench::printGpuModel(name + " " + std::to_string(batch) + "/" +
                                      std::to_string(context) + "/" +
                                      std::to_string(result.SplitTokens),
                                  result, options.profileBlocks);
      });
}

/// Bytes of one token of `tensor` in full precision and quantized.
double tokenBytes(const Manifest &manifest, Tensor tensor, bool quantized) {
  const ModelShape &model = manifest.Model;
  if (quantized)
    return double(manifest.tensor(tensor).PageBytes) / manifest.PageTokens;
  return double(model.KvHeads) * model.HeadDim *
         (model.Type == DType::F32 ? 4 : 2);
}

/// Times one step `call` of `heat`; `other` is the same step on another
/// sequence, which DataCold runs first and Cold after (so that both
/// sequences keep flushing at the same steps).
double timeStep(Bench &bench, Heat heat, const std::function<void()> &call,
                const std::function<void()> &other) {
  switch (heat) {
  case Heat::Cold: {
    double seconds = bench.clock->cold(call);
    other();
    return seconds;
  }
  case Heat::DataCold:
    return bench.clock->coldAfter(other, call);
  case Heat::Warm:
    break;
  }
  return bench.clock->warm(call, 1).median;
}

/// `steps` single-token appends to sequence `seq`, each timed alone at
/// `heat`; sequence `other` holds as many tokens and takes the same steps
/// (untimed) until the warm ones.
StepResult runSteps(Bench &bench, Cache &cache, SequenceId seq,
                    SequenceId other, unsigned context, Heat heat) {
  const Manifest &manifest = cache.artifact().manifest();
  unsigned steps = bench.options.steps;
  // Steps reuse the pool's first tokens: their values do not matter.
  std::vector<double> times;
  std::vector<unsigned> flushed;
  std::vector<double> bytes;
  SliceCounts before = take(cache.counts(seq, 0));
  for (unsigned s = 0; s < steps; ++s) {
    times.push_back(timeStep(
        bench, heat, [&] { bench.append(cache, {seq}, s % context, 1); },
        [&] { bench.append(cache, {other}, s % context, 1); }));
    SliceCounts after = take(cache.counts(seq, 0));
    double stepBytes = 4 * tokenBytes(manifest, Tensor::Keys, false);
    unsigned tokens = 0;
    for (Tensor t : {Tensor::Keys, Tensor::Values}) {
      unsigned u = after[t].Quantized - before[t].Quantized;
      tokens += u;
      stepBytes +=
          u * (tokenBytes(manifest, t, false) + tokenBytes(manifest, t, true));
    }
    flushed.push_back(tokens);
    bytes.push_back(stepBytes);
    before = after;
  }
  StepResult result;
  if (steps == 0)
    return result;
  result.step = kvq::bench::summarize(times);
  result.flushTokens = *std::max_element(flushed.begin(), flushed.end());
  std::vector<double> flushTimes;
  for (unsigned s = 0; s < steps; ++s)
    if (flushed[s] == result.flushTokens) {
      flushTimes.push_back(times[s]);
      result.flushBytes = bytes[s];
    }
  result.flushSteps = flushTimes.size();
  result.flushStep = kvq::bench::summarize(flushTimes);
  return result;
}

/// The prefill of the longest context into a fresh sequence, and then
/// `options.steps` single-token appends at each Heat.
AppendResult runAppend(Bench &bench, std::shared_ptr<const Artifact> artifact) {
  const Options &options = bench.options;
  const Manifest &manifest = artifact->manifest();
  unsigned context = options.contexts.back();
  auto cache = makeCache(artifact, options, 2, context + 3 * options.steps);
  AppendResult result;
  std::vector<double> prefills;
  SequenceId seq = 0;
  for (unsigned r = 0; r < std::max(1u, options.repeat / 3); ++r) {
    if (r > 0)
      check(cache->removeSequence(seq));
    seq = take(cache->addSequence());
    prefills.push_back(
        bench.clock->cold([&] { bench.append(*cache, {seq}, 0, context); }));
  }
  result.prefill = kvq::bench::summarize(prefills);
  result.prefillBytes =
      2 * context * tokenBytes(manifest, Tensor::Keys, false) +
      attendBytes(*cache);
  if (options.steps == 0)
    return result;
  SequenceId other = take(cache->addSequence());
  bench.append(*cache, {other}, 0, context);
  for (Heat heat : {Heat::Cold, Heat::DataCold, Heat::Warm})
    result.steps[int(heat)] =
        runSteps(bench, *cache, seq, other, context, heat);
  return result;
}

void printAttend(const std::vector<Series> &series, const Options &options,
                 double bandwidth) {
  std::printf("decode attention, layer 0: cold: median of %u calls "
              "[min-max]; warm: %s of %u calls; %% of bw on the bytes each "
              "call must read; speedup vs %s\n",
              options.repeat, options.device == "cpu" ? "median" : "mean",
              options.repeat, series[0].name.c_str());
  std::printf("%-24s %5s %7s %24s %7s %6s %8s | %9s %7s %8s\n", "cache",
              "batch", "context", "cold ms [min-max]", "MB read", "% bw",
              "speedup", "warm ms", "% bw", "speedup");
  for (size_t b = 0; b < options.batches.size(); ++b) {
    for (size_t c = 0; c < options.contexts.size(); ++c) {
      const AttendResult &base = series[0].attend[b][c];
      for (const Series &s : series) {
        const AttendResult &r = s.attend[b][c];
        char range[32];
        std::snprintf(range, sizeof(range), "%.3f [%.3f-%.3f]",
                      r.cold.median * 1e3, r.cold.min * 1e3, r.cold.max * 1e3);
        std::printf(
            "%-24s %5u %7u %24s %7.1f %5.1f%% %7.2fx | %9.3f %6.1f%% %7.2fx\n",
            s.name.c_str(), options.batches[b], options.contexts[c], range,
            r.bytes / 1e6, 100.0 * r.bytes / r.cold.median / bandwidth,
            base.cold.median / r.cold.median, r.warm.median * 1e3,
            100.0 * r.bytes / r.warm.median / bandwidth,
            base.warm.median / r.warm.median);
      }
      std::printf("\n");
    }
  }
}

void printAppend(const std::vector<Series> &series, const Options &options,
                 double bandwidth) {
  std::printf("append, layer 0, 1 sequence: prefill of %u tokens, cold "
              "(median [min-max]); then %u decode steps at each heat (median "
              "of all steps; median of the `steps` steps that flushed the "
              "most, `tokens`, tokens); %% of bw on bytes read + written\n",
              options.contexts.back(), options.steps);
  std::printf("%-24s %24s %6s %6s %6s | %-26s | %-26s | %-26s\n", "", "", "",
              "", "", "cold steps", "cold data, warm code", "warm steps");
  std::printf("%-24s %24s %6s %6s %6s", "cache", "prefill ms [min-max]", "% bw",
              "tokens", "steps");
  for (int heat = 0; heat < 3; ++heat)
    std::printf(" | %9s %9s %6s", "step ms", "flush ms", "% bw");
  std::printf("\n");
  for (const Series &s : series) {
    const AppendResult &a = s.append;
    char range[32];
    std::snprintf(range, sizeof(range), "%.2f [%.2f-%.2f]",
                  a.prefill.median * 1e3, a.prefill.min * 1e3,
                  a.prefill.max * 1e3);
    const StepResult &cold = a.steps[int(Heat::Cold)];
    std::printf("%-24s %24s %5.1f%% %6s %6u", s.name.c_str(), range,
                100.0 * a.prefillBytes / a.prefill.median / bandwidth,
                options.steps ? std::to_string(cold.flushTokens).c_str() : "-",
                cold.flushSteps);
    for (const StepResult &r : a.steps) {
      if (options.steps == 0) {
        std::printf(" | %9s %9s %6s", "-", "-", "-");
        continue;
      }
      std::printf(" | %9.3f %9.3f %5.1f%%", r.step.median * 1e3,
                  r.flushStep.median * 1e3,
                  100.0 * r.flushBytes / r.flushStep.median / bandwidth);
    }
    std::printf("\n");
  }
}

/// The name of the folder that holds `path` (the working directory's for
/// a bare name).
std::string parentName(const std::string &path) {
  std::filesystem::path absolute = std::filesystem::absolute(path);
  if (!absolute.has_filename())
    absolute = absolute.parent_path();
  return absolute.parent_path().filename().string();
}

/// The name the tables give the artifact in `dir` named `name`, after the
/// artifacts named `earlier`: the same spec compiled twice (before / after
/// a change) is told apart by the folder that holds the artifact.
std::string seriesName(std::string name, const std::string &dir,
                       const std::vector<std::string> &earlier) {
  for (const std::string &other : earlier)
    if (other == name)
      name += "@" + parentName(dir);
  return name;
}

/// `--gpu-model`: the model table of every artifact, batch and context.
int gpuModelMain(Bench &bench) {
  kvq::bench::printGpuModelHeader();
  std::vector<std::string> names;
  for (const std::string &dir : bench.options.artifacts) {
    auto artifact = take(Artifact::open(dir));
    bench.usePool(artifact->manifest().Model);
    names.push_back(seriesName(artifact->manifest().Name, dir, names));
    for (unsigned batch : bench.options.batches)
      runGpuModel(bench, artifact, names.back(), batch);
  }
  return 0;
}

/// The backend's clock: the host's, or the GPU's (`--device cuda`).
std::unique_ptr<Clock> makeClock(const Options &options) {
  if (options.device == "cpu")
    return kvq::bench::createHostClock(options.threads, options.evictBytes,
                                       options.probeBytes);
  // Several times the largest L2 (an H200's 60 MiB) unless given.
  size_t flushBytes =
      options.evictBytes ? options.evictBytes : size_t(512) << 20;
  return take(kvq::bench::createDeviceClock(flushBytes, options.probeBytes));
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  if (options.gpuModel) {
    Bench bench{options};
    return gpuModelMain(bench);
  }
  std::unique_ptr<Clock> clock = makeClock(options);
  Bench bench{options, clock.get()};
  if (options.device == "cuda")
    bench.device = static_cast<DeviceClock *>(clock.get());
  std::printf("kvq-bench: %s\n\n", clock->describe().c_str());

  std::vector<Series> series;
  for (const std::string &dir : options.artifacts) {
    auto artifact = take(Artifact::open(dir));
    bench.usePool(artifact->manifest().Model);
    Series s;
    std::vector<std::string> earlier;
    for (const Series &other : series)
      earlier.push_back(other.name);
    s.name = seriesName(artifact->manifest().Name, dir, earlier);
    for (unsigned batch : options.batches)
      s.attend.push_back(runAttend(bench, artifact, batch));
    s.append = runAppend(bench, artifact);
    series.push_back(std::move(s));
  }
  printAttend(series, options, clock->bandwidth());
  printAppend(series, options, clock->bandwidth());
  return 0;
}
