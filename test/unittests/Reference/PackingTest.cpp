//===- PackingTest.cpp - Dense code packing ---------------------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Packing.h"

#include "gtest/gtest.h"

#include <random>

using namespace kvq::ref;

namespace {

TEST(Packing, WordCount) {
  EXPECT_EQ(packedWords(32, 2), 2);
  EXPECT_EQ(packedWords(32, 3), 3);
  EXPECT_EQ(packedWords(24, 3), 3);
  EXPECT_EQ(packedWords(24, 5), 4);
  EXPECT_EQ(packedWords(128, 1), 4);
  EXPECT_EQ(packedWords(1, 1), 1);
  EXPECT_EQ(packedWords(0, 4), 0);
}

TEST(Packing, LowestBitsFirst) {
  const uint32_t codes[] = {1, 2, 3};
  EXPECT_EQ(packCodes(codes, 3, 2), std::vector<uint32_t>{0x39});
  const uint32_t nibbles[] = {0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0xA};
  EXPECT_EQ(packCodes(nibbles, 9, 4), (std::vector<uint32_t>{0x87654321, 0xA}));
}

TEST(Packing, CodesStraddleWords) {
  // Eleven 3-bit codes of 7: bits 0..32; code 10 spans bits 30..32.
  std::vector<uint32_t> sevens(11, 7);
  EXPECT_EQ(packCodes(sevens.data(), 11, 3),
            (std::vector<uint32_t>{0xFFFFFFFF, 0x1}));
  // Code 10 alone = 0b101: bits 30 and 32.
  std::vector<uint32_t> one(11, 0);
  one[10] = 5;
  EXPECT_EQ(packCodes(one.data(), 11, 3),
            (std::vector<uint32_t>{0x40000000, 0x1}));
}

TEST(Packing, RoundTripAllWidths) {
  std::mt19937 rng(3);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int n : {32, 64, 128, 24}) {
      std::vector<uint32_t> codes(n);
      for (uint32_t &c : codes)
        c = rng() & ((1u << bits) - 1);
      std::vector<uint32_t> words = packCodes(codes.data(), n, bits);
      ASSERT_EQ(int(words.size()), (n * bits + 31) / 32);
      EXPECT_EQ(unpackCodes(words.data(), n, bits), codes)
          << "bits=" << bits << " n=" << n;
      // Unused high bits of the last word stay zero.
      int used = n * bits - 32 * (int(words.size()) - 1);
      if (used < 32) {
        EXPECT_EQ(words.back() >> used, 0u) << "bits=" << bits << " n=" << n;
      }
    }
  }
}

TEST(Packing, MaximalCodesRoundTrip) {
  for (int bits = 1; bits <= 16; ++bits) {
    std::vector<uint32_t> codes(24, (1u << bits) - 1);
    std::vector<uint32_t> words = packCodes(codes.data(), 24, bits);
    EXPECT_EQ(unpackCodes(words.data(), 24, bits), codes) << bits;
  }
}

} // namespace
