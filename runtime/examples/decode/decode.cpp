//===- decode.cpp - Prefill two sequences and attend with kvq -------------===//
//
// Part of kvq, libkvq_runtime examples.
//
//===----------------------------------------------------------------------===//
//
// Usage: kvq-example-decode ARTIFACT_DIR [cpu|cuda]
//
// Opens an artifact compiled by `kvq-opt --kvq-compile=DIR SPEC`, creates a
// cache, appends a random 1000-token prompt to two sequences on every layer,
// runs decode attention on layer 0 and prints the output norms and the
// cache's memory use.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace kvq::runtime;

namespace {

constexpr unsigned kPromptTokens = 1000;
constexpr unsigned kSequences = 2;

int fail(const char *What, const std::string &Message) {
  std::fprintf(stderr, "kvq-example-decode: %s: %s\n", What, Message.c_str());
  return 1;
}

std::vector<float> randomValues(std::mt19937 &Rng, size_t N) {
  std::normal_distribution<float> Dist(0.0f, 1.0f);
  std::vector<float> V(N);
  for (float &X : V)
    X = Dist(Rng);
  return V;
}

} // namespace

int main(int Argc, char **Argv) {
  if (Argc < 2) {
    std::fprintf(stderr, "usage: %s ARTIFACT_DIR [cpu|cuda]\n", Argv[0]);
    return 2;
  }
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Argv[1]);
  if (!A.ok())
    return fail("open", A.message());
  const Manifest &M = (*A)->manifest();
  const ModelShape &Shape = M.Model;
  std::printf("artifact %s: %u layers, %u heads, %u kv-heads, head_dim %u, "
              "%s; %.3f code bits, %.3f storage bits\n",
              M.Name.c_str(), Shape.Layers, Shape.Heads, Shape.KvHeads,
              Shape.HeadDim, toString(Shape.Type), M.CodeBits, M.StorageBits);

  CacheOptions Options;
  Options.Backend = Argc > 2 && std::strcmp(Argv[2], "cuda") == 0
                        ? BackendKind::Cuda
                        : BackendKind::Cpu;
  Options.MaxSequences = kSequences;
  unsigned PagesPerSeq = (kPromptTokens + M.PageTokens - 1) / M.PageTokens + 1;
  Options.PagesPerTensor = kSequences * PagesPerSeq;
  Expected<std::unique_ptr<Cache>> C = Cache::create(*A, Options);
  if (!C.ok())
    return fail("create", C.message());
  Cache &Cache = **C;
  std::printf("backend: %s\n", Cache.backend().name().c_str());

  std::vector<SequenceId> Seqs;
  for (unsigned S = 0; S < kSequences; ++S) {
    Expected<SequenceId> Id = Cache.addSequence();
    if (!Id.ok())
      return fail("add sequence", Id.message());
    Seqs.push_back(*Id);
  }

  // Prefill: the whole prompt of every sequence in one append per layer.
  std::mt19937 Rng(42);
  size_t Row = size_t(Shape.KvHeads) * Shape.HeadDim;
  for (unsigned L = 0; L < Shape.Layers; ++L) {
    std::vector<std::vector<float>> Data;
    std::vector<AppendItemF32> Batch;
    for (SequenceId Id : Seqs) {
      Data.push_back(randomValues(Rng, kPromptTokens * Row));
      Data.push_back(randomValues(Rng, kPromptTokens * Row));
      Batch.push_back({Id, kPromptTokens, Data[Data.size() - 2].data(),
                       Data.back().data()});
    }
    if (Status S = Cache.append(L, Batch); !S.ok())
      return fail("append", S.message());
  }

  // Decode attention on layer 0, one query per sequence.
  size_t QRow = size_t(Shape.Heads) * Shape.HeadDim;
  std::vector<float> Q = randomValues(Rng, Seqs.size() * QRow);
  std::vector<float> Out(Q.size());
  if (Status S = Cache.attendF32(0, Seqs, Q.data(), Out.data()); !S.ok())
    return fail("attend", S.message());
  for (size_t S = 0; S < Seqs.size(); ++S) {
    double Norm = 0;
    for (size_t I = 0; I < QRow; ++I)
      Norm += double(Out[S * QRow + I]) * Out[S * QRow + I];
    std::printf("sequence %zu: |out| = %.6f over %u heads\n", S,
                std::sqrt(Norm), Shape.Heads);
  }

  MemoryStats Stats = Cache.memoryStats();
  std::printf("memory: %llu bytes used (%llu key pages, %llu value pages, "
              "%llu window, %llu sink, %llu norm, %llu table bytes), "
              "%llu allocated\n",
              (unsigned long long)Stats.BytesUsed,
              (unsigned long long)Stats.KeyPagesInUse,
              (unsigned long long)Stats.ValuePagesInUse,
              (unsigned long long)Stats.WindowBytes,
              (unsigned long long)Stats.SinkBytes,
              (unsigned long long)Stats.NormBytes,
              (unsigned long long)Stats.TableBytes,
              (unsigned long long)Stats.BytesAllocated);
  std::printf("equivalent bits per cached element: %.3f\n",
              Stats.BitsPerElement);
  return 0;
}
