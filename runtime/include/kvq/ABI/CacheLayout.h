//===- CacheLayout.h - where a cache keeps its tokens -----------*- C++ -*-===//
//
// Part of kvq. Plain C++17, shared by the code generator and the runtime: the
// numbers of a slice's layout in a page (docs/KernelABI.md, "Page layout"),
// the rules they obey and the arithmetic that computes them, and the sizes
// of the window rings and outlier pools, each written once.
//
// kvq-assign-layout computes a cache's layout with computeSliceLayout and
// placeSlices; `#kvq.slice_layout` spells a SliceLayout in IR (its verifier
// is findLayoutError); the kernels address pages by it; the artifact writer
// writes each field under its manifest key (ManifestSchema.h) and the
// runtime reads them back, checks them with findLayoutError, and requires
// them to equal the layout its schemes give, so that a manifest cannot
// describe pages other than the ones its kernels write.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_ABI_CACHELAYOUT_H
#define KVQ_ABI_CACHELAYOUT_H

#include "kvq/ABI/ManifestSchema.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

// X(Type, Id, Default): the numbers of one layer's slice layout, in the
// order of #kvq.slice_layout's parameters. `Id` is the member's name, the
// attribute's accessor (get<Id>) and the manifest key (manifest::key::Id);
// a field at its default is elided in IR.
#define KVQ_SLICE_LAYOUT_FIELDS(X)                                             \
  X(uint64_t, Offset, 0)                                                       \
  X(uint64_t, SliceBytes, 0)                                                   \
  X(unsigned, WordsPerGroup, 0)                                                \
  X(unsigned, GroupsPerToken, 0)                                               \
  X(unsigned, GroupsPerPage, 0)                                                \
  X(unsigned, ParamBytes, 0)                                                   \
  X(uint64_t, CodesBytes, 0)                                                   \
  X(uint64_t, ScalesOffset, 0)                                                 \
  X(int64_t, ZerosOffset, -1)                                                  \
  X(int64_t, CodesFrom, -1)                                                    \
  X(int64_t, CodesLayerDelta, 0)                                               \
  X(int64_t, CodesHeadDelta, 0)                                                \
  X(unsigned, WordsPerToken, 0)

namespace kvq::abi {

/// Every region of a page starts on this many bytes, for 128-bit loads.
inline constexpr uint64_t kLayoutAlignment = 16;

inline uint64_t alignTo(uint64_t Value, uint64_t Align) {
  return (Value + Align - 1) / Align * Align;
}

/// The bits a group of `Size` codes of `Bits` bits takes: whole 32-bit words.
inline uint64_t getGroupCodeBits(unsigned Bits, uint64_t Size) {
  return alignTo(Size * Bits, 32);
}

/// Where the codes and parameters of one (layer, kv-head) slice of a page
/// live. Slice (l, h) starts at byte `Offset + h * SliceBytes` of the page.
/// A quantized slice holds its codes at 0 (`CodesBytes`; none when it reuses
/// layer `CodesFrom`'s, whose codes for kv-head h are `CodesLayerDelta + h *
/// CodesHeadDelta` bytes from it), `GroupsPerPage` scales of `ParamBytes` at
/// `ScalesOffset` and, unless sym (`ZerosOffset` = -1), as many zero-points
/// at `ZerosOffset`. Group n's codes are words [n * WordsPerGroup, ...);
/// with channel reorder (variable group sizes) a token's codes take
/// `WordsPerToken` words and group g of kv-head h starts at word
/// `GroupWords[h * GroupsPerToken + g]` of them (WordsPerGroup is 0). A
/// full-precision slice sets only Offset and SliceBytes.
struct SliceLayout {
#define KVQ_SLICE_LAYOUT_MEMBER(Type, Id, Default) Type Id = Default;
  KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_MEMBER)
#undef KVQ_SLICE_LAYOUT_MEMBER
  std::vector<int32_t> GroupWords;

  bool sharesCodes() const { return CodesFrom >= 0; }
  bool hasReorder() const { return !GroupWords.empty(); }
  bool hasZeros() const { return ZerosOffset >= 0; }

  bool operator==(const SliceLayout &Other) const {
#define KVQ_SLICE_LAYOUT_EQUAL(Type, Id, Default)                              \
  if (Id != Other.Id)                                                          \
    return false;
    KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_EQUAL)
#undef KVQ_SLICE_LAYOUT_EQUAL
    return GroupWords == Other.GroupWords;
  }
  bool operator!=(const SliceLayout &Other) const { return !(*this == Other); }
};

/// What a slice's layout depends on: how its scheme stores a page.
struct SliceScheme {
  bool Quantized = false;
  unsigned Bits = 0;
  unsigned Group = 0;
  bool SpanTokens = false;
  /// Sym schemes store no zero-points.
  bool Sym = false;
  unsigned ParamBytes = 0;
  /// Channel reorder: the group sizes of the layer, [kv-head][group]; empty
  /// without.
  std::vector<int64_t> ReorderSizes;
  /// The earlier layer whose codes this layer reuses, or -1.
  int64_t CodesFrom = -1;
};

/// The shape of a page's slices: its tokens and a model's kv-heads, head
/// dimension and full-precision element size.
struct PageShape {
  unsigned PageTokens = 0;
  unsigned KvHeads = 0;
  unsigned HeadDim = 0;
  unsigned DtypeBytes = 0;
};

/// The layout of one slice of `Scheme` in a page of `Shape`, with Offset and
/// the sharing deltas 0 (placeSlices sets them). The scheme's group divides
/// what it groups (head_dim for span = channels without reorder, the page's
/// tokens for span = tokens).
inline SliceLayout computeSliceLayout(const SliceScheme &Scheme,
                                      const PageShape &Shape) {
  SliceLayout S;
  S.CodesFrom = Scheme.CodesFrom;
  if (!Scheme.Quantized) {
    S.SliceBytes =
        alignTo(uint64_t(Shape.PageTokens) * Shape.HeadDim * Shape.DtypeBytes,
                kLayoutAlignment);
    return S;
  }
  S.WordsPerGroup = unsigned(getGroupCodeBits(Scheme.Bits, Scheme.Group) / 32);
  if (!Scheme.SpanTokens) {
    S.GroupsPerToken = Shape.HeadDim / Scheme.Group;
    S.GroupsPerPage = Shape.PageTokens * S.GroupsPerToken;
  } else {
    S.GroupsPerPage = Shape.PageTokens / Scheme.Group * Shape.HeadDim;
  }
  S.ParamBytes = Scheme.ParamBytes;
  uint64_t ParamArray =
      alignTo(uint64_t(S.GroupsPerPage) * S.ParamBytes, kLayoutAlignment);
  uint64_t CodeWords = uint64_t(S.GroupsPerPage) * S.WordsPerGroup;
  if (!Scheme.ReorderSizes.empty()) {
    // Each group starts on a word; a token takes the words the kv-head
    // needing most of them takes.
    S.WordsPerGroup = 0;
    for (unsigned H = 0; H < Shape.KvHeads; ++H) {
      uint64_t Word = 0;
      for (unsigned G = 0; G < S.GroupsPerToken; ++G) {
        S.GroupWords.push_back(int32_t(Word));
        Word += getGroupCodeBits(
                    Scheme.Bits,
                    uint64_t(Scheme.ReorderSizes[H * S.GroupsPerToken + G])) /
                32;
      }
      S.WordsPerToken = std::max(S.WordsPerToken, unsigned(Word));
    }
    CodeWords = uint64_t(Shape.PageTokens) * S.WordsPerToken;
  }
  if (!S.sharesCodes())
    S.CodesBytes = alignTo(CodeWords * 4, kLayoutAlignment);
  S.ScalesOffset = S.CodesBytes;
  S.SliceBytes = S.ScalesOffset + ParamArray;
  if (!Scheme.Sym) {
    S.ZerosOffset = int64_t(S.SliceBytes);
    S.SliceBytes += ParamArray;
  }
  return S;
}

/// Places the layers' slices one after another in a page of `KvHeads`
/// slices per layer: sets each Offset and each sharing layer's deltas to
/// its owner's codes, and returns the page's bytes. `Slices` holds
/// SliceLayouts or classes derived from it, sharing only with earlier
/// layers.
template <typename SliceRange>
uint64_t placeSlices(SliceRange &Slices, unsigned KvHeads) {
  uint64_t PageBytes = 0;
  for (SliceLayout &S : Slices) {
    S.Offset = PageBytes;
    PageBytes += uint64_t(KvHeads) * S.SliceBytes;
  }
  for (SliceLayout &S : Slices) {
    if (!S.sharesCodes())
      continue;
    const SliceLayout &Owner = Slices[size_t(S.CodesFrom)];
    S.CodesLayerDelta = int64_t(Owner.Offset) - int64_t(S.Offset);
    S.CodesHeadDelta = int64_t(Owner.SliceBytes) - int64_t(S.SliceBytes);
  }
  return PageBytes;
}

/// The first field in which `Got` differs from `Want` as "name is X, the
/// schemes give Y" (names as in the manifest and IR); empty when equal.
inline std::string describeDifference(const SliceLayout &Got,
                                      const SliceLayout &Want) {
#define KVQ_SLICE_LAYOUT_DIFF(Type, Id, Default)                               \
  if (Got.Id != Want.Id)                                                       \
    return std::string(manifest::key::Id) + " is " + std::to_string(Got.Id) +  \
           ", the schemes give " + std::to_string(Want.Id);
  KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_DIFF)
#undef KVQ_SLICE_LAYOUT_DIFF
  if (Got.GroupWords != Want.GroupWords)
    return std::string(manifest::key::GroupWords) + " differ from the schemes'";
  return std::string();
}

/// Why `S` breaks the rules every slice layout obeys, or null: regions on
/// kLayoutAlignment bytes, codes and parameters inside the slice, and
/// reorder words consistent. The rules of one slice alone; equality with
/// computeSliceLayout is the stronger check a reader of schemes can make.
inline const char *findLayoutError(const SliceLayout &S) {
  auto Aligned = [](uint64_t Value) { return Value % kLayoutAlignment == 0; };
  if (!Aligned(S.Offset) || !Aligned(S.SliceBytes) ||
      !Aligned(S.ScalesOffset) || (S.hasZeros() && !Aligned(S.ZerosOffset)))
    return "slice offsets and sizes must be multiples of 16 bytes";
  auto Within = [&](uint64_t At, uint64_t Bytes) {
    return At <= S.SliceBytes && Bytes <= S.SliceBytes - At;
  };
  uint64_t Params = uint64_t(S.GroupsPerPage) * S.ParamBytes;
  if (S.CodesBytes > S.SliceBytes ||
      (S.ParamBytes && !Within(S.ScalesOffset, Params)) ||
      (S.hasZeros() && !Within(uint64_t(S.ZerosOffset), Params)))
    return "codes or parameters lie outside the slice";
  if (S.CodesFrom < -1)
    return "codes_from must be -1 or a layer";
  if (S.hasReorder()) {
    if (S.WordsPerGroup || !S.GroupsPerToken ||
        S.GroupWords.size() % S.GroupsPerToken != 0)
      return "group_words needs groups_per_token and no words_per_group";
    for (int32_t Word : S.GroupWords)
      if (Word < 0 || unsigned(Word) >= S.WordsPerToken)
        return "group_words must lie in [0, words_per_token)";
  } else if (S.WordsPerToken) {
    return "words_per_token needs group_words";
  }
  return nullptr;
}

/// The rows of a tensor's window ring: the `Recent` tokens kept in full
/// precision and a flush unit less one, the most the window holds between
/// flushes (docs/KernelABI.md, "Window rings").
inline uint64_t getWindowCapacity(uint64_t Recent, uint64_t Flush) {
  return Recent + Flush - 1;
}

/// OTT's outlier pools (docs/KernelABI.md, "Outlier pools"): layers from
/// FirstLayer on keep, per sequence and kv-head, Entries = Capacity + Extra
/// full-precision key and value rows and an index of IndexWords u32, the
/// kPoolHeaderWords counters (pool count, extra count, stopped, 0) and then
/// each entry's sequence position. All zero without pools.
inline constexpr unsigned kPoolHeaderWords = 4;

struct PoolLayout {
  unsigned Capacity = 0;
  unsigned Extra = 0;
  unsigned FirstLayer = 0;
  unsigned Entries = 0;
  unsigned IndexWords = 0;

  bool isTracked(unsigned Layer) const {
    return Capacity && Layer >= FirstLayer;
  }
  bool operator==(const PoolLayout &Other) const {
    return Capacity == Other.Capacity && Extra == Other.Extra &&
           FirstLayer == Other.FirstLayer && Entries == Other.Entries &&
           IndexWords == Other.IndexWords;
  }
};

/// The pools of `Capacity` entries and `Extra` extra entries from layer
/// `FirstLayer` on; no pools (all zero, FirstLayer kept) for Capacity 0.
inline PoolLayout computePoolLayout(unsigned Capacity, unsigned Extra,
                                    unsigned FirstLayer) {
  PoolLayout P;
  P.FirstLayer = FirstLayer;
  if (!Capacity)
    return P;
  P.Capacity = Capacity;
  P.Extra = Extra;
  P.Entries = Capacity + Extra;
  P.IndexWords = P.Entries + kPoolHeaderWords;
  return P;
}

} // namespace kvq::abi

#endif // KVQ_ABI_CACHELAYOUT_H
