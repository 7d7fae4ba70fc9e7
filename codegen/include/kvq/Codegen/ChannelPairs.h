//===- ChannelPairs.h - span=channels key groups on pair dots ---*- C++ -*-===//
//
// The arithmetic of span=channels keys on 16-bit integer pair dots
// (docs/Numerics.md, "Attention on integer dots"), shared by the emitted
// attend kernel's form (AttendI16.cpp) and the attend programs' (the
// kvq.group_dot form of GroupDotPairs.cpp): each head's query rounded to
// i16 once, a token's groups side by side in each vector of i32 lanes, one
// pair dot a head and vector, and the heads' i32 sums folded into their
// groups, scaled by the groups' slopes and offset by the query's group
// sums after the dots.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_CHANNELPAIRS_H
#define KVQ_CODEGEN_CHANNELPAIRS_H

#include "kvq/Codegen/KernelBuilder.h"

namespace kvq {

/// The shape of the form: each vector of `lanes` i32 lanes holds every
/// group of a token, `groupLanes` lanes each, a lane a pair of adjacent
/// channels; `vectors` vectors cover the token. Lane l belongs to group
/// l % groups, so that folding lanes `groups` apart sums within groups.
struct ChannelPairs {
  unsigned lanes, groups, group, groupLanes, vectors;

  ChannelPairs(unsigned lanes, unsigned groups, unsigned group)
      : lanes(lanes), groups(groups), group(group), groupLanes(lanes / groups),
        vectors(group / (2 * groupLanes)) {}
  /// Whether a token of `groups` groups of `group` channels fits the form
  /// on `lanes` lanes: the groups share each vector alike.
  static bool fits(unsigned lanes, unsigned groups, unsigned group) {
    return groups > 0 && lanes % groups == 0 &&
           group % (2 * (lanes / groups)) == 0;
  }
  /// The channel in half `half` (of the i16 halves) of vector `v`.
  unsigned channelOf(unsigned v, unsigned half) const {
    unsigned lane = half / 2, g = lane % groups, k = lane / groups;
    return g * group + v * 2 * groupLanes + 2 * k + half % 2;
  }
  /// The bit of each half's code of vector `v` in a token's code words
  /// (unpackHalves' halfBits): group g's `bits`-bit codes from word g *
  /// wordsPerGroup.
  llvm::SmallVector<unsigned> getHalfBits(unsigned v, unsigned wordsPerGroup,
                                          unsigned bits) const;
  /// A head's query, `row` (f32, groups x group channels), rounded to i16
  /// against its largest magnitude: each vector's pairs as i32 lanes. Sets
  /// `scale` to the i16 factors' scale, largest / 32767.
  llvm::SmallVector<mlir::Value> roundQuery(KernelBuilder &kb, mlir::Value row,
                                            mlir::Value &scale) const;
};

/// The heads' scores of a token from their i32 pair sums. The heads go in
/// chunks whose sums fold into one vector without mixing groups (a run of
/// lanes / count lanes a head keeps every group); a chunk's scores are one
/// vector, head (first + i)'s at lane i * (lanes / count).
class ChannelPairScores {
public:
  struct HeadChunk {
    unsigned first, count;
    /// By lane: the head's query scale, and its group sums (its run's
    /// first `groups` lanes).
    mlir::Value scales, groupSums;
  };

  /// For heads whose query scales are `queryScales` (f32) and group sums
  /// `groupSums` (f32 vectors of `pairs.groups`: the sums of each group's
  /// unrounded query).
  ChannelPairScores(KernelBuilder &kb, const ChannelPairs &pairs,
                    llvm::ArrayRef<mlir::Value> queryScales,
                    llvm::ArrayRef<mlir::Value> groupSums);

  llvm::ArrayRef<HeadChunk> getChunks() const { return chunks; }
  /// The chunks' score vectors of a token whose heads' i32 sums are `sums`
  /// (a vector of lanes a head, lane l of group l % groups) and whose
  /// groups' slopes and offsets are `slopes` and `offsets` (f32 vectors of
  /// `pairs.groups`).
  llvm::SmallVector<mlir::Value> score(KernelBuilder &kb,
                                       llvm::ArrayRef<mlir::Value> sums,
                                       mlir::Value slopes,
                                       mlir::Value offsets) const;

private:
  ChannelPairs pairs;
  llvm::SmallVector<HeadChunk> chunks;
};

} // namespace kvq

#endif // KVQ_CODEGEN_CHANNELPAIRS_H
