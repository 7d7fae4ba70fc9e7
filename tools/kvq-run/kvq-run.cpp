//===- kvq-run.cpp - run a decode step on a compiled spec -----------------===//
//
// The main job on a compiled spec: prefill one sequence with random keys and
// values in every layer, run one decode step (append one token and attend,
// in every layer) on the CPU backend, and report the cache's bits, the
// attention error against exact attention over the unquantized (model dtype)
// keys and values, and the time kvq's calls take: the prefill's appends
// (not the making of their synthetic inputs), the decode step's appends and
// attention apart.
//
//   kvq-run ARTIFACT_DIR [--tokens N] [--threads N]
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace kvq::runtime;

namespace {

using Clock = std::chrono::steady_clock;

/// Runs `call` and adds its time to `seconds`.
void timed(double &seconds, const std::function<void()> &call) {
  auto start = Clock::now();
  call();
  seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "kvq-run: %s\n", message.c_str());
  std::exit(1);
}

void check(const Status &status) {
  if (!status.ok())
    fail(status.message());
}

/// Synthetic rows [n][Hkv][D] rounded to the model dtype, shaped like real
/// caches (KIVI, section 3): every channel has its own offset, and keys have
/// a few outlier channels with a much larger range.
std::vector<float> randomRows(std::mt19937 &rng, const ModelShape &model,
                              unsigned n, bool isKeys) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::mt19937 channelRng(isKeys ? 11 : 13);
  std::vector<float> offsets(size_t(model.KvHeads) * model.HeadDim);
  for (float &offset : offsets)
    offset = normal(channelRng);
  std::vector<float> rows(size_t(n) * offsets.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    size_t channel = i % offsets.size();
    float scale = isKeys && channel % 29 == 3 ? 8.0f : 1.0f;
    rows[i] = offsets[channel] + 0.5f * normal(rng) * scale;
  }
  std::vector<uint8_t> raw(rows.size() * byteSize(model.Type));
  convertFromF32(model.Type, rows.data(), rows.size(), raw.data());
  convertToF32(model.Type, raw.data(), rows.size(), rows.data());
  return rows;
}

/// Exact decode attention in fp64 over every token of one layer.
std::vector<double> exactAttention(const ModelShape &model,
                                   const std::vector<float> &q,
                                   const std::vector<float> &k,
                                   const std::vector<float> &v) {
  unsigned dim = model.HeadDim, ratio = model.Heads / model.KvHeads;
  size_t tokens = k.size() / (size_t(model.KvHeads) * dim);
  std::vector<double> out(q.size(), 0.0);
  for (unsigned hq = 0; hq < model.Heads; ++hq) {
    unsigned h = hq / ratio;
    std::vector<double> scores(tokens);
    double maxScore = -INFINITY;
    for (size_t t = 0; t < tokens; ++t) {
      double dot = 0;
      for (unsigned c = 0; c < dim; ++c)
        dot += double(q[hq * dim + c]) * k[(t * model.KvHeads + h) * dim + c];
      scores[t] = dot * model.Scale;
      maxScore = std::max(maxScore, scores[t]);
    }
    double sum = 0;
    for (double &s : scores)
      sum += s = std::exp(s - maxScore);
    for (size_t t = 0; t < tokens; ++t)
      for (unsigned c = 0; c < dim; ++c)
        out[hq * dim + c] +=
            scores[t] / sum * v[(t * model.KvHeads + h) * dim + c];
  }
  return out;
}

constexpr const char *Usage =
    "usage: kvq-run ARTIFACT_DIR [--tokens N] [--threads N]";

void printHelp() {
  std::printf(
      "%s\n"
      "\n"
      "Runs one decode step on a compiled spec (kvq-opt --kvq-compile=DIR):\n"
      "prefills one sequence with random keys and values in every layer,\n"
      "appends one token and attends in every layer on the CPU backend, and\n"
      "prints the cache's bits per element (asymptotic and measured), layer\n"
      "0's attention error against exact attention over the unquantized keys\n"
      "and values, and the time of kvq's calls: the prefill's appends (not\n"
      "the making of their synthetic inputs), the decode step's appends and\n"
      "attention apart.\n"
      "\n"
      "options:\n"
      "  --tokens N    prompt tokens prefilled before the step (default 1024)\n"
      "  --threads N   CPU backend threads (default 2)\n"
      "  -h, --help    this help\n",
      Usage);
}

} // namespace

int main(int argc, char **argv) {
  std::string dir;
  unsigned tokens = 1024, threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printHelp();
      return 0;
    }
    if ((arg == "--tokens" || arg == "--threads") && i + 1 < argc)
      (arg == "--tokens" ? tokens : threads) = std::stoul(argv[++i]);
    else if (arg[0] != '-' && dir.empty())
      dir = arg;
    else
      fail(std::string(Usage) + " (--help)");
  }
  if (dir.empty())
    fail(std::string(Usage) + " (--help)");

  auto artifact = Artifact::open(dir);
  if (!artifact.ok())
    fail(artifact.message());
  const Manifest &manifest = (*artifact)->manifest();
  const ModelShape &model = manifest.Model;
  CacheOptions options;
  options.MaxSequences = 1;
  options.PagesPerTensor = (tokens + 1) / manifest.PageTokens + 2;
  options.Threads = threads;
  auto cache = Cache::create(*artifact, options);
  if (!cache.ok())
    fail(cache.message());
  auto seq = (*cache)->addSequence();
  if (!seq.ok())
    fail(seq.message());

  std::printf("kvq-run: %s (%u layers, %u query / %u kv heads, head_dim %u, "
              "%s), CPU backend, %u threads\n",
              manifest.Name.c_str(), model.Layers, model.Heads, model.KvHeads,
              model.HeadDim, toString(model.Type), threads);
  std::printf("bits per element: code %.4g, storage %.4g (asymptotic)\n",
              manifest.CodeBits, manifest.StorageBits);

  std::mt19937 rng(2026);
  std::vector<float> keys0, values0;
  double prefill = 0;
  for (unsigned layer = 0; layer < model.Layers; ++layer) {
    std::vector<float> k = randomRows(rng, model, tokens, true);
    std::vector<float> v = randomRows(rng, model, tokens, false);
    timed(prefill, [&] {
      check((*cache)->append(layer, {{*seq, tokens, k.data(), v.data()}}));
    });
    if (layer == 0) {
      keys0 = std::move(k);
      values0 = std::move(v);
    }
  }

  // One decode step: every layer appends its new token and attends.
  std::vector<float> q = randomRows(rng,
                                    {model.Layers, model.Heads, model.Heads,
                                     model.HeadDim, model.Type, model.Scale},
                                    1, false);
  std::vector<float> out(q.size()), out0;
  std::vector<float> newK = randomRows(rng, model, 1, true);
  std::vector<float> newV = randomRows(rng, model, 1, false);
  double decodeAppend = 0, decodeAttend = 0;
  for (unsigned layer = 0; layer < model.Layers; ++layer) {
    timed(decodeAppend, [&] {
      check((*cache)->append(layer, {{*seq, 1, newK.data(), newV.data()}}));
    });
    timed(decodeAttend, [&] {
      check((*cache)->attendF32(layer, {*seq}, q.data(), out.data()));
    });
    if (layer == 0)
      out0 = out;
  }
  double decode = decodeAppend + decodeAttend;

  keys0.insert(keys0.end(), newK.begin(), newK.end());
  values0.insert(values0.end(), newV.begin(), newV.end());
  std::vector<double> exact = exactAttention(model, q, keys0, values0);
  double errorSq = 0, normSq = 0, maxError = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    double e = out0[i] - exact[i];
    errorSq += e * e;
    normSq += exact[i] * exact[i];
    maxError = std::max(maxError, std::fabs(e));
  }
  MemoryStats stats = (*cache)->memoryStats();
  std::printf("context: %u tokens + 1 decode token (synthetic keys and "
              "values with channel offsets and key outlier channels)\n",
              tokens);
  std::printf("memory: %.2f MiB in use, %.4f bits per cached element "
              "(windows, pages, metadata)\n",
              stats.BytesUsed / 1048576.0, stats.BitsPerElement);
  uint64_t saturated[2] = {0, 0};
  for (Tensor t : {Tensor::Keys, Tensor::Values}) {
    Expected<std::vector<uint32_t>> counts = (*cache)->saturatedGroups(t);
    if (!counts.ok())
      fail(counts.message());
    for (uint32_t n : *counts)
      saturated[int(t)] += n;
  }
  std::printf("saturated parameter groups (clamped to the parameter dtype's "
              "range): keys %llu, values %llu\n",
              (unsigned long long)saturated[0],
              (unsigned long long)saturated[1]);
  // The exact baseline treats the keys as rotated; pre-RoPE keys are
  // rotated by the kernel with the spec's RoPE, which the runtime never sees.
  if (manifest.Keys.Layers[0].Scheme.PreRope)
    std::printf("error vs exact %s attention (layer 0): not computed, its "
                "keys are pre-RoPE (the end-to-end tests check it)\n",
                toString(model.Type));
  else
    std::printf("error vs exact %s attention (layer 0): relative L2 %.3e, "
                "max abs %.3e\n",
                toString(model.Type), std::sqrt(errorSq / normSq), maxError);
  std::printf("time: prefill %.1f ms (the appends of %u tokens in %u "
              "layers, f32 inputs converted to %s on %u threads)\n",
              prefill * 1e3, tokens, model.Layers, toString(model.Type),
              threads);
  std::printf("time: decode step %.3f ms = append %.3f ms + attend %.3f ms "
              "(%u layers, %.3f ms per layer)\n",
              decode * 1e3, decodeAppend * 1e3, decodeAttend * 1e3,
              model.Layers, decode * 1e3 / model.Layers);
  return 0;
}
