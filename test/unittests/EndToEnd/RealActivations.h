//===- RealActivations.h - SmolLM2-135M activations for the tests -*- C++
//-*-===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// Reads Inputs/smollm2-activations.bin, written by
// `python -m kvq.activations` (python/kvq/activations.py, which
// documents the format): real queries, keys (before and after RoPE) and
// values of a few layers of SmolLM2-135M over a short English text.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TEST_REALACTIVATIONS_H
#define KVQ_TEST_REALACTIVATIONS_H

#include "kvq/Reference/FloatFormats.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kvq::test {

struct RealActivations {
  unsigned Tokens = 0, Heads = 0, KvHeads = 0, HeadDim = 0;
  std::vector<unsigned> Layers;
  /// Per captured layer and array name ("q", "k_pre_rope", "k", "v"):
  /// [Tokens][heads of the array][HeadDim] as floats (f16 values).
  std::vector<std::map<std::string, std::vector<float>>> Data;

  /// The array `Name` of captured layer `Index` reshaped to `Count` heads of
  /// `Dim` channels, `Dim` a multiple of HeadDim: [Tokens][Count][Dim], where
  /// chunk c of head h is the model's head (h * Dim / HeadDim + c) modulo
  /// the heads the array has. Real values, for any test shape.
  std::vector<float> heads(unsigned Index, const std::string &Name,
                           unsigned Count, unsigned Dim) const {
    const std::vector<float> &All = Data[Index].at(Name);
    unsigned Have = unsigned(All.size() / (size_t(Tokens) * HeadDim));
    unsigned Chunks = Dim / HeadDim;
    std::vector<float> Out;
    for (unsigned T = 0; T < Tokens; ++T)
      for (unsigned H = 0; H < Count; ++H)
        for (unsigned C = 0; C < Chunks; ++C) {
          unsigned Source = (H * Chunks + C) % Have;
          const float *Row = &All[(size_t(T) * Have + Source) * HeadDim];
          Out.insert(Out.end(), Row, Row + HeadDim);
        }
    return Out;
  }

  /// Loads `Path`, or nullopt if it is missing or malformed.
  static std::optional<RealActivations> load(const std::string &Path) {
    std::ifstream In(Path, std::ios::binary);
    std::stringstream Buffer;
    Buffer << In.rdbuf();
    std::string Bytes = Buffer.str();
    static const char Magic[] = "KVQACT1\n";
    if (Bytes.size() < 12 || Bytes.compare(0, 8, Magic) != 0)
      return std::nullopt;
    uint32_t HeaderSize;
    std::memcpy(&HeaderSize, Bytes.data() + 8, 4);
    if (Bytes.size() < 12 + size_t(HeaderSize))
      return std::nullopt;
    auto Header = nlohmann::json::parse(Bytes.substr(12, HeaderSize), nullptr,
                                        /*allow_exceptions=*/false);
    if (Header.is_discarded())
      return std::nullopt;
    RealActivations A;
    A.Tokens = Header["tokens"];
    A.Heads = Header["heads"];
    A.KvHeads = Header["kv_heads"];
    A.HeadDim = Header["head_dim"];
    A.Layers = Header["layers"].get<std::vector<unsigned>>();
    size_t Offset = 12 + HeaderSize;
    for (size_t L = 0; L < A.Layers.size(); ++L) {
      A.Data.emplace_back();
      for (const std::string &Name :
           Header["arrays"].get<std::vector<std::string>>()) {
        unsigned H = Name == "q" ? A.Heads : A.KvHeads;
        size_t Count = size_t(A.Tokens) * H * A.HeadDim;
        if (Bytes.size() < Offset + 2 * Count)
          return std::nullopt;
        std::vector<float> &Out = A.Data.back()[Name];
        for (size_t I = 0; I < Count; ++I) {
          uint16_t Bits;
          std::memcpy(&Bits, Bytes.data() + Offset + 2 * I, 2);
          Out.push_back(ref::fromF16Bits(Bits));
        }
        Offset += 2 * Count;
      }
    }
    return A;
  }
};

} // namespace kvq::test

#endif // KVQ_TEST_REALACTIVATIONS_H
