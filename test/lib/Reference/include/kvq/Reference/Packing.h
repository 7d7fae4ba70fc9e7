//===- Packing.h - Dense code packing of the reference ----------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// numerics.md section 3, "Packing": the codes of one group, in the order of
// the group's span, are packed densely into 32-bit words, lowest bits first
// (KIVI's order). Code i occupies bits [i*b, i*b + b) of the group's bit
// stream, where bit k is bit (k % 32) of word k / 32; a code may straddle two
// words. A group of n codes occupies ceil(n*b / 32) words; unused high bits
// of the last word are zero.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_PACKING_H
#define KVQ_REFERENCE_PACKING_H

#include <cstdint>
#include <vector>

namespace kvq::ref {

/// ceil(n * bits / 32).
int packedWords(int n, int bits);

/// Packs codes[0..n) of \p bits bits each (1..32; every code < 2^bits).
std::vector<uint32_t> packCodes(const uint32_t *codes, int n, int bits);

/// Unpacks n codes of \p bits bits from \p words (packedWords(n, bits) words).
std::vector<uint32_t> unpackCodes(const uint32_t *words, int n, int bits);

} // namespace kvq::ref

#endif // KVQ_REFERENCE_PACKING_H
