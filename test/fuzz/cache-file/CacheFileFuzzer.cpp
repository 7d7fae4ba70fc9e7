//===- CacheFileFuzzer.cpp - Fuzz restoring a cache file ------------------===//
//
// Part of kvq, the fuzz harnesses.
//
//===----------------------------------------------------------------------===//
//
// The input is a cache file (runtime/lib/CacheFile.cpp). Its manifest hash
// is set to the mock artifact's and its checksum recomputed first, so that
// mutations reach the parser and the checks behind it rather than those
// two tests alone (the seed files keep working when the mock manifest
// changes). It is restored into a
// mock cache that already holds a sequence: a rejected file must leave the
// cache's sequences and free pages as they were (else the harness traps);
// restored sequences are attended, saved again and removed.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"
#include "kvq/ABI/ManifestBinding.h"

#include <cstring>

using namespace kvq::runtime;

namespace {

Cache &cache() {
  static std::unique_ptr<Cache> C = [] {
    Expected<std::shared_ptr<const Artifact>> A =
        Artifact::open(KVQ_MOCK_ARTIFACT_DIR);
    CacheOptions O;
    O.MaxSequences = 4;
    O.PagesPerTensor = 16;
    O.Threads = 1;
    Expected<std::unique_ptr<Cache>> C = Cache::create(*A, O);
    Expected<SequenceId> S = (*C)->addSequence();
    std::vector<float> K(23 * 16, 0.25f);
    for (unsigned L = 0; L < 2; ++L)
      (void)(*C)->append(L, {{*S, 23, K.data(), K.data()}});
    return std::move(*C);
  }();
  return *C;
}

/// What a rejected restore must not change.
std::vector<uint64_t> shape(Cache &C) {
  std::vector<uint64_t> V = {C.freePages(Tensor::Keys),
                             C.freePages(Tensor::Values)};
  for (SequenceId S : C.sequences())
    V.push_back(S);
  return V;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::vector<uint8_t> File(Data, Data + Size);
  Cache &C = cache();
  if (Size >= 32) {
    uint64_t Hash = C.artifact().manifestHash();
    for (unsigned I = 0; I < 8; ++I)
      File[16 + I] = uint8_t(Hash >> (8 * I));
  }
  if (Size >= 16) {
    uint64_t Sum = kvq::fnv1a64(std::string_view(
        reinterpret_cast<const char *>(File.data()), Size - 8));
    for (unsigned I = 0; I < 8; ++I)
      File[Size - 8 + I] = uint8_t(Sum >> (8 * I));
  }
  std::vector<uint64_t> Before = shape(C);
  Expected<std::vector<SequenceId>> Ids =
      C.deserialize(File.data(), File.size());
  if (!Ids.ok()) {
    if (shape(C) != Before)
      __builtin_trap();
    return 0;
  }
  std::vector<float> Q(4 * 8, 1.0f), Out;
  for (SequenceId S : *Ids) {
    for (unsigned L = 0; L < 2; ++L)
      (void)C.attendF32(L, {S}, Q, Out);
    (void)C.serialize({S});
    (void)C.removeSequence(S);
  }
  return 0;
}
