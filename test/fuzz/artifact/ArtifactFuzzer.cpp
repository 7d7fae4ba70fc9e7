//===- ArtifactFuzzer.cpp - Fuzz the artifact loader ----------------------===//
//
// Part of kvq, the fuzz harnesses.
//
//===----------------------------------------------------------------------===//
//
// The input describes a hostile or corrupted artifact directory: byte 0
// chooses the host code (bits 0-1: the mock artifact's kernels.so, a
// truncated copy, none, or a symlink escaping the directory; bit 2: a PTX
// file of junk; bit 3: a kernels.o of junk; bit 4: one byte of the
// kernels.so copy flipped), the rest is manifest.json. Where the manifest
// has a files.host_shared_fnv1a, the harness writes the mock kernels.so's
// checksum into it (as the cache-file harness reseals its files), so that
// mutations reach the loader and the cache, not only the checksum check.
// The harness opens the directory, reads its PTX and host code, creates a
// CPU backend and, when all of that succeeds (only for a manifest its
// kernels were built for), a cache that appends and attends. Errors are
// expected; crashes and sanitizer findings are findings.
//
//===----------------------------------------------------------------------===//

#include "kvq/ABI/ManifestBinding.h"
#include "kvq/Runtime/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

using namespace kvq::runtime;

namespace {

struct Dirs {
  std::string Root, Art;
  /// The mock artifact's kernels.so, and its checksum as a manifest
  /// records it.
  std::string Kernels, Checksum;
};

std::string readAll(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(In), {});
}

/// Writes a new file and renames it over Path: a library still mapped by
/// an earlier run is never changed in place.
void replaceFile(const std::string &Path, const void *Data, size_t Size) {
  std::string Tmp = Path + ".new";
  std::ofstream(Tmp, std::ios::binary)
      .write(static_cast<const char *>(Data), std::streamsize(Size));
  std::rename(Tmp.c_str(), Path.c_str());
}

const Dirs &dirs() {
  static Dirs D = [] {
    Dirs D;
    std::string Template =
        std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
        "/kvq-fuzz-artifact-XXXXXX";
    D.Root = mkdtemp(Template.data()) ? Template : "/tmp";
    D.Art = D.Root + "/artifact";
    (void)system(("mkdir -p '" + D.Art + "'").c_str());
    D.Kernels = readAll(std::string(KVQ_MOCK_ARTIFACT_DIR) + "/kernels.so");
    D.Checksum = kvq::formatHostSharedChecksum(kvq::fnv1a64(D.Kernels));
    replaceFile(D.Root + "/outside.so", D.Kernels.data(), D.Kernels.size());
    return D;
  }();
  return D;
}

void placeHostCode(const Dirs &D, unsigned Mode, bool Corrupt) {
  std::string Path = D.Art + "/kernels.so";
  std::remove(Path.c_str());
  if (Mode == 0 && Corrupt) {
    std::string Code = D.Kernels;
    Code[Code.size() / 3] ^= 0x40;
    replaceFile(Path, Code.data(), Code.size());
  } else if (Mode == 0)
    replaceFile(Path, D.Kernels.data(), D.Kernels.size());
  else if (Mode == 1)
    replaceFile(Path, D.Kernels.data(), D.Kernels.size() / 2);
  else if (Mode == 3)
    (void)symlink("../outside.so", Path.c_str());
}

/// Appends and attends once on a cache over A.
void exercise(std::shared_ptr<const Artifact> A, std::unique_ptr<Backend> B) {
  CacheOptions O;
  O.MaxSequences = 2;
  O.PagesPerTensor = 4;
  Expected<std::unique_ptr<Cache>> C = Cache::create(A, O, std::move(B));
  if (!C.ok())
    return;
  Expected<SequenceId> S = (*C)->addSequence();
  const ModelShape &M = A->manifest().Model;
  std::vector<float> K(size_t(9) * M.KvHeads * M.HeadDim, 0.5f);
  std::vector<float> Q(size_t(M.Heads) * M.HeadDim, 1.0f), Out;
  if (S.ok() && (*C)->append(0, {{*S, 9, K.data(), K.data()}}).ok())
    (void)(*C)->attendF32(0, {*S}, Q, Out);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  if (Size < 1)
    return 0;
  const Dirs &D = dirs();
  std::string Manifest(reinterpret_cast<const char *>(Data + 1), Size - 1);
  if (size_t Digits = kvq::findHostSharedChecksum(Manifest);
      Digits != std::string::npos)
    Manifest.replace(Digits, D.Checksum.size(), D.Checksum);
  replaceFile(D.Art + "/manifest.json", Manifest.data(), Manifest.size());
  placeHostCode(D, Data[0] & 3, Data[0] & 16);
  std::string Ptx = D.Art + "/kernels.sm_80.ptx", Obj = D.Art + "/kernels.o";
  std::remove(Ptx.c_str());
  std::remove(Obj.c_str());
  if (Data[0] & 4)
    replaceFile(Ptx, "// junk\n", 8);
  if (Data[0] & 8)
    replaceFile(Obj,
                "\x7f"
                "ELF junk",
                9);

  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(D.Art);
  if (!A.ok())
    return 0;
  for (const std::string &Target : (*A)->ptxTargets())
    (void)(*A)->loadPTX(Target);
  (void)(*A)->hostObjectPath();
  Expected<std::unique_ptr<Backend>> B = createCpuBackend(**A, 1);
  if (B.ok())
    exercise(*A, std::move(*B));
  return 0;
}
