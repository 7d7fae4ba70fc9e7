//===- SealMockManifest.cpp - record the mock kernels.so's checksum -------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// Usage: kvq-seal-mock-manifest TEMPLATE KERNELS_SO OUTPUT
//
// Writes TEMPLATE (Inputs/mock/manifest.json, whose files.host_shared_fnv1a
// holds zeros) to OUTPUT with the checksum of KERNELS_SO filled in, as the
// artifact writer does for the kernels it links (kvq/ABI/ManifestBinding.h).
// The mock kernels carry the hash of TEMPLATE's bytes, which the manifest
// hash of OUTPUT equals.
//
//===----------------------------------------------------------------------===//

#include "kvq/ABI/ManifestBinding.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

static bool readAll(const char *Path, std::string &Out) {
  std::ifstream In(Path, std::ios::binary);
  Out.assign(std::istreambuf_iterator<char>(In), {});
  return !In.bad() && In.is_open();
}

int main(int Argc, char **Argv) {
  if (Argc != 4) {
    std::fprintf(stderr, "usage: %s TEMPLATE KERNELS_SO OUTPUT\n", Argv[0]);
    return 2;
  }
  std::string Manifest, Kernels;
  if (!readAll(Argv[1], Manifest) || !readAll(Argv[2], Kernels)) {
    std::fprintf(stderr, "%s: cannot read the inputs\n", Argv[0]);
    return 1;
  }
  size_t Digits = kvq::findHostSharedChecksum(Manifest);
  if (Digits == std::string::npos) {
    std::fprintf(stderr, "%s: %s has no host_shared_fnv1a\n", Argv[0], Argv[1]);
    return 1;
  }
  Manifest.replace(Digits, kvq::kHostSharedChecksumDigits,
                   kvq::formatHostSharedChecksum(kvq::fnv1a64(Kernels)));
  std::ofstream Out(Argv[3], std::ios::binary | std::ios::trunc);
  Out << Manifest;
  return Out.good() ? 0 : 1;
}
