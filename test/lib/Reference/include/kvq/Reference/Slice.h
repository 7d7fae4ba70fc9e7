//===- Slice.h - Cache slice simulator of the reference ---------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// One cache slice (sequence, layer, kv-head): the sink / quantized / recent
// window regions of numerics.md section 1 for keys and values, the flush
// rule, InnerQ key normalisation, and fp64 decode attention (section 5).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_SLICE_H
#define KVQ_REFERENCE_SLICE_H

#include "kvq/Reference/OutlierPool.h"
#include "kvq/Reference/Quantizer.h"
#include "kvq/Reference/Rope.h"
#include "kvq/Reference/Rotation.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::ref {

/// How one side (keys or values) of a slice is cached.
struct SideConfig {
  QuantScheme scheme;
  /// The first `sink` tokens of the sequence stay full precision forever.
  int sink = 0;
  /// Recent window W and flush unit U: after an append, while the window
  /// holds >= W + U tokens, its oldest U tokens are quantized.
  int window = 0;
  int flushUnit = 1;
  /// SKVQ channel reorder (span = channels only): position i of the
  /// reordered token holds channel perm[i]; groups then take groupSizes[g]
  /// consecutive positions (head_dim / G sizes summing to head_dim). Both
  /// empty: no reorder (positions = channels, groups of G).
  std::vector<int> perm;
  std::vector<int> groupSizes;
  /// Per-group clip factors (SKVQ's calibrated `a`), in (0, 1]: one per
  /// group of a token (span = channels, in position order) or per channel
  /// (span = tokens). Empty: scheme.clip for every group.
  std::vector<float> groupClips;
  /// `rotate = hadamard`: every flushed row is rotated (rotateForward) before
  /// it is quantized; codes, parameters and dequantizedAt() are of the
  /// rotated row. Not with reorder, key norms, pre-RoPE keys or pools.
  RotationConfig rotation;
};

struct SliceConfig {
  int headDim = 128;
  SideConfig key;
  SideConfig value;
  /// InnerQ per-channel key normalisation.
  bool keyNorm = false;
  /// OTT outlier pools (capacity 0: not tracked). Keys and values must then
  /// share sink, window and flush unit.
  PoolConfig pool;
  /// Pre-RoPE keys: every key is stored and quantized unrotated; attention
  /// rotates it to its position.
  RopeConfig rope;
};

/// Returns an empty string if \p config is valid, else why it is not.
std::string validate(const SliceConfig &config);

/// Where a token of one side lives.
enum class Region { Sink, Quantized, Window };

/// The keys or the values of a slice. Tokens are numbered from 0 in sequence
/// order; the regions are contiguous: sink [0, numSink()), quantized
/// [numSink(), numSink() + numQuantized()), window after that.
class CacheSide {
public:
  CacheSide(const SideConfig &config, int headDim);

  /// Divides every quantized row by \p norms (per channel, fp32 true
  /// division) before quantizing it. Set once, before the first flush.
  void setNorms(std::vector<float> norms);

  /// Appends n rows (row-major n x D) and applies the flush rule.
  void append(const float *rows, int n);

  // The steps of append, for a caller that changes flushed rows (OTT).
  /// Appends n rows without applying the flush rule.
  void push(const float *rows, int n);
  /// The flush units the flush rule would quantize now.
  int pendingUnits() const;
  /// Window row i (0 = oldest).
  const float *windowRow(int i) const {
    return window_.data() + size_t(i) * headDim_;
  }
  /// Quantizes `rows` (U x D) as the next flush unit, in place of the
  /// window rows they stand for; dropOldest removes those afterwards.
  void flushRows(const float *rows);
  void dropOldest(int n);

  const SideConfig &config() const { return config_; }
  const QuantScheme &scheme() const { return config_.scheme; }
  int headDim() const { return headDim_; }
  const std::vector<float> &norms() const { return norms_; }

  int numTokens() const { return numSink() + numQuantized() + numWindow(); }
  int numSink() const { return int(sink_.size()) / headDim_; }
  int numQuantized() const { return numQuantized_; }
  int numWindow() const { return int(window_.size()) / headDim_; }
  Region regionOf(int token) const;

  /// Full-precision rows, row-major, exactly as appended.
  const std::vector<float> &sinkRows() const { return sink_; }
  const std::vector<float> &windowRows() const { return window_; }

  /// Codes of the quantized region, row-major numQuantized() x D: entry
  /// i * D + c is quantized token i (0 = oldest), channel c.
  const std::vector<uint32_t> &codes() const { return codes_; }

  /// Stored parameters, one per group, in group order (see groupOf).
  const std::vector<float> &scales() const { return scales_; }
  const std::vector<float> &zeros() const { return zeros_; }
  int numGroups() const { return int(scales_.size()); }
  /// Groups whose stored parameters saturated (numerics.md section 3).
  int numSaturated() const { return saturated_; }

  /// The group of quantized token i, channel c. Groups are numbered in the
  /// order flushes create them: span=tokens (i / G) * D + c, span=channels
  /// i * (D / G) + (the group of c's position: c / G without reorder).
  int groupOf(int quantizedToken, int channel) const;

  /// span = channels: groups per token, and the first position and size of
  /// group g of a token (after any reorder).
  int groupsPerToken() const { return int(groupStarts_.size()); }
  int groupStart(int g) const { return groupStarts_[g]; }
  int groupSize(int g) const { return groupSizes_[g]; }
  /// The channel at position i of a reordered token (i without reorder).
  int channelAt(int position) const { return perm_[position]; }

  /// The codes of one group in span order, unpacked and packed.
  std::vector<uint32_t> groupCodes(int group) const;
  std::vector<uint32_t> packedGroup(int group) const;
  /// All groups packed, concatenated in group order.
  std::vector<uint32_t> packedCodes() const;

  /// Reconstruction of quantized token i, channel c (normalised space when
  /// norms are set, rotated space under a rotation).
  float dequantizedAt(int quantizedToken, int channel) const;

  /// numTokens() x D in fp32: sink and window rows as stored, quantized rows
  /// dequantized (normalised space when norms are set; under a rotation
  /// rotated back in fp64, then rounded to fp32).
  std::vector<float> dequantized() const;

private:
  void quantizeTokenSpan(const std::vector<float> &rows, int firstToken);
  void quantizeChannelSpan(const std::vector<float> &rows, int firstToken);

  /// The scheme of the `index`-th group of a token (span = channels) or of
  /// channel `index` (span = tokens): its own clip factor if per group.
  QuantScheme groupScheme(int index) const;

  SideConfig config_;
  int headDim_;
  /// span = channels layout after reorder: the permutation (identity without
  /// reorder), each group's first position and size, and the group of each
  /// position, and the position of each channel.
  std::vector<int> perm_, groupStarts_, groupSizes_, positionGroup_, position_;
  std::vector<float> norms_;
  std::vector<float> sink_;
  std::vector<float> window_;
  int numQuantized_ = 0;
  std::vector<uint32_t> codes_;
  std::vector<float> scales_;
  int saturated_ = 0;
  std::vector<float> zeros_;
};

/// A cache slice: keys and values of one (sequence, layer, kv-head).
class Slice {
public:
  explicit Slice(const SliceConfig &config);

  /// Appends n tokens: k and v are row-major n x D fp32 values already
  /// representable in the model dtype. With keyNorm, the first append with
  /// n > 0 (the prompt) fixes the key norms.
  void append(const float *k, const float *v, int n);

  const SliceConfig &config() const { return config_; }
  int numTokens() const { return keys_.numTokens(); }
  const CacheSide &keys() const { return keys_; }
  const CacheSide &values() const { return values_; }

  /// Key norms n_c (empty without keyNorm or before the first append).
  const std::vector<float> &keyNorms() const { return keys_.norms(); }

  /// OTT pools (disabled when config().pool.capacity is 0).
  const OutlierPool &pools() const { return pool_; }

  std::vector<float> dequantizedKeys() const { return keys_.dequantized(); }
  std::vector<float> dequantizedValues() const { return values_.dequantized(); }

  /// Decode attention in fp64 for \p queryHeads query heads sharing this
  /// kv-head: q is queryHeads x D, out is queryHeads x D. With no tokens the
  /// output is zero. Quantized tokens in an OTT pool are attended from the
  /// pool, at full precision, instead of their masked quantized slots. With
  /// pre-RoPE keys, \p rotateQuery rotates q to the last token's position
  /// first (q is otherwise already rotated). A \p visible of 0 or more
  /// attends only the tokens at positions below it (a causal prefix), each
  /// as the slice holds it now.
  void attend(const float *q, int queryHeads, double scale, double *out,
              bool rotateQuery = false, int visible = -1) const;

private:
  void appendTracked(const float *k, const float *v, int n);

  SliceConfig config_;
  CacheSide keys_;
  CacheSide values_;
  OutlierPool pool_;
};

/// InnerQ key norms of \p n rows of \p d channels: n_c = sqrt(max_t
/// |k[t][c]|) in fp32 (correctly rounded sqrt), or 1 where that max is 0.
std::vector<float> computeKeyNorms(const float *k, int n, int d);

} // namespace kvq::ref

#endif // KVQ_REFERENCE_SLICE_H
