//===- Packing.cpp - Dense code packing of the reference --------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Packing.h"
#include "kvq/Reference/Quantizer.h"

namespace kvq::ref {

namespace {

void checkBits(int bits, int n) {
  if (bits < 1 || bits > 32)
    fatalError("packing needs 1..32 bits per code");
  if (n < 0)
    fatalError("negative code count");
}

uint64_t codeMask(int bits) { return (uint64_t(1) << bits) - 1; }

} // namespace

int packedWords(int n, int bits) { return int((int64_t(n) * bits + 31) / 32); }

std::vector<uint32_t> packCodes(const uint32_t *codes, int n, int bits) {
  checkBits(bits, n);
  std::vector<uint32_t> words(packedWords(n, bits), 0);
  for (int i = 0; i < n; ++i) {
    if (codes[i] > codeMask(bits))
      fatalError("code does not fit its bit width");
    int64_t bit = int64_t(i) * bits;
    int64_t word = bit / 32;
    int shift = int(bit % 32);
    // Place the code in a 64-bit window over words [word, word + 1].
    uint64_t placed = uint64_t(codes[i]) << shift;
    words[word] |= uint32_t(placed);
    if (shift + bits > 32)
      words[word + 1] |= uint32_t(placed >> 32);
  }
  return words;
}

std::vector<uint32_t> unpackCodes(const uint32_t *words, int n, int bits) {
  checkBits(bits, n);
  std::vector<uint32_t> codes(n);
  for (int i = 0; i < n; ++i) {
    int64_t bit = int64_t(i) * bits;
    int64_t word = bit / 32;
    int shift = int(bit % 32);
    uint64_t window = words[word];
    if (shift + bits > 32)
      window |= uint64_t(words[word + 1]) << 32;
    codes[i] = uint32_t((window >> shift) & codeMask(bits));
  }
  return codes;
}

} // namespace kvq::ref
