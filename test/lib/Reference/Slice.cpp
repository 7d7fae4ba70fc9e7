//===- Slice.cpp - Cache slice simulator of the reference -------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Slice.h"
#include "kvq/Reference/Packing.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvq::ref {

namespace {

/// Groups along one token: D / G for span = channels, one per channel for
/// span = tokens (the clip table's length).
int groupsPerToken(const SideConfig &side, int headDim) {
  return side.scheme.span == Span::Channels ? headDim / side.scheme.groupSize
                                            : headDim;
}

std::string validateTables(const SideConfig &side, int headDim,
                           const std::string &prefix) {
  if (side.perm.empty() != side.groupSizes.empty())
    return prefix + "reorder needs both a permutation and group sizes";
  if (!side.perm.empty()) {
    if (side.scheme.span != Span::Channels)
      return prefix + "channel reorder needs span=channels";
    std::vector<bool> seen(headDim, false);
    if (int(side.perm.size()) != headDim)
      return prefix + "the permutation needs head_dim entries";
    for (int c : side.perm) {
      if (c < 0 || c >= headDim || seen[c])
        return prefix + "perm is not a permutation of the channels";
      seen[c] = true;
    }
    if (int(side.groupSizes.size()) != groupsPerToken(side, headDim))
      return prefix + "reorder needs head_dim / G group sizes";
    int total = 0;
    for (int size : side.groupSizes) {
      if (size < 1)
        return prefix + "group sizes must be positive";
      total += size;
    }
    if (total != headDim)
      return prefix + "group sizes must sum to head_dim";
  }
  if (!side.groupClips.empty()) {
    if (int(side.groupClips.size()) != groupsPerToken(side, headDim))
      return prefix + "one clip factor per group of a token expected";
    for (float a : side.groupClips)
      if (!(a > 0.0f && a <= 1.0f))
        return prefix + "clip factors must be in (0, 1]";
  }
  return "";
}

std::string validateSide(const SideConfig &side, int headDim,
                         const char *name) {
  std::string prefix = std::string(name) + ": ";
  std::string error = validate(side.scheme);
  if (!error.empty())
    return prefix + error;
  if (side.sink < 0 || side.window < 0 || side.flushUnit < 1)
    return prefix + "need sink >= 0, window >= 0, flush unit >= 1";
  int g = side.scheme.groupSize;
  if (side.scheme.span == Span::Tokens && side.flushUnit % g != 0)
    return prefix + "span=tokens needs the flush unit to be a multiple of "
                    "the group size";
  if (side.scheme.span == Span::Channels && headDim % g != 0)
    return prefix + "span=channels needs head_dim to be a multiple of the "
                    "group size";
  error = validate(side.rotation, headDim);
  if (error.empty() && side.rotation.enabled && !side.perm.empty())
    error = "a rotation cannot be combined with a channel reorder";
  if (!error.empty())
    return prefix + error;
  return validateTables(side, headDim, prefix);
}

} // namespace

std::string validate(const SliceConfig &config) {
  if (config.headDim < 1)
    return "head_dim must be positive";
  std::string error = validateSide(config.key, config.headDim, "keys");
  if (error.empty())
    error = validate(config.rope, config.headDim);
  if (error.empty())
    error = validateSide(config.value, config.headDim, "values");
  bool rotated = config.key.rotation.enabled || config.value.rotation.enabled;
  if (error.empty() && config.key.rotation.enabled &&
      (config.keyNorm || config.rope.enabled()))
    error = "keys: a rotation cannot be combined with key norms or pre-RoPE "
            "keys";
  if (error.empty() && rotated && config.pool.capacity != 0)
    error = "a rotation cannot be combined with outlier pools";
  if (!error.empty() || config.pool.capacity == 0)
    return error;
  if (config.pool.capacity < 0 || config.pool.extra < 0)
    return "pool capacity and extra must be >= 0";
  // The pool takes a token out of both tensors at the same flush.
  if (config.key.sink != config.value.sink ||
      config.key.window != config.value.window ||
      config.key.flushUnit != config.value.flushUnit)
    return "outlier pools need keys and values with the same sink, window "
           "and flush unit";
  return "";
}

std::vector<float> computeKeyNorms(const float *k, int n, int d) {
  std::vector<float> norms(d);
  for (int c = 0; c < d; ++c) {
    float mx = 0.0f;
    for (int t = 0; t < n; ++t)
      mx = std::max(mx, std::fabs(k[size_t(t) * d + c]));
    norms[c] = mx == 0.0f ? 1.0f : std::sqrt(mx);
  }
  return norms;
}

//===----------------------------------------------------------------------===//
// CacheSide
//===----------------------------------------------------------------------===//

CacheSide::CacheSide(const SideConfig &config, int headDim)
    : config_(config), headDim_(headDim) {
  std::string error = validateSide(config, headDim, "cache side");
  if (!error.empty())
    fatalError(error);
  if (config.scheme.span != Span::Channels)
    return;
  int g = config.scheme.groupSize;
  perm_ = config.perm;
  groupSizes_ = config.groupSizes;
  if (perm_.empty()) {
    for (int c = 0; c < headDim; ++c)
      perm_.push_back(c);
    groupSizes_.assign(headDim / g, g);
  }
  position_.resize(headDim);
  for (int i = 0; i < headDim; ++i)
    position_[perm_[i]] = i;
  for (int group = 0, start = 0; group < int(groupSizes_.size()); ++group) {
    groupStarts_.push_back(start);
    positionGroup_.insert(positionGroup_.end(), groupSizes_[group], group);
    start += groupSizes_[group];
  }
}

QuantScheme CacheSide::groupScheme(int index) const {
  QuantScheme scheme = config_.scheme;
  if (!config_.groupClips.empty())
    scheme.clip = config_.groupClips[index];
  return scheme;
}

void CacheSide::setNorms(std::vector<float> norms) {
  if (int(norms.size()) != headDim_)
    fatalError("one norm per channel expected");
  if (numQuantized_ != 0)
    fatalError("norms must be set before the first flush");
  norms_ = std::move(norms);
}

void CacheSide::push(const float *rows, int n) {
  const int d = headDim_;
  for (int t = 0; t < n; ++t) {
    const float *row = rows + size_t(t) * d;
    // A token is a sink token by its position in the sequence.
    std::vector<float> &dest = numTokens() < config_.sink ? sink_ : window_;
    dest.insert(dest.end(), row, row + d);
  }
}

int CacheSide::pendingUnits() const {
  int held = numWindow(), w = config_.window, u = config_.flushUnit;
  return held >= w + u ? (held - w) / u : 0;
}

void CacheSide::dropOldest(int n) {
  window_.erase(window_.begin(), window_.begin() + size_t(n) * headDim_);
}

void CacheSide::append(const float *rows, int n) {
  push(rows, n);
  // Flushing after the whole append or after every token gives the same
  // state: each flush takes the U oldest window tokens either way. The
  // flushed rows are erased once at the end (a long prompt flushes often).
  const int u = config_.flushUnit;
  int units = pendingUnits();
  for (int i = 0; i < units; ++i)
    flushRows(windowRow(i * u));
  dropOldest(units * u);
}

void CacheSide::flushRows(const float *unit) {
  const int d = headDim_;
  const int u = config_.flushUnit;
  std::vector<float> rows(unit, unit + size_t(u) * d);
  if (!norms_.empty())
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = rows[i] / norms_[i % d];
  if (config_.rotation.enabled)
    for (int t = 0; t < u; ++t)
      rotateForward(config_.rotation, rows.data() + size_t(t) * d, d);

  int firstToken = numQuantized_;
  numQuantized_ += u;
  codes_.resize(size_t(numQuantized_) * d);
  if (scheme().span == Span::Tokens)
    quantizeTokenSpan(rows, firstToken);
  else
    quantizeChannelSpan(rows, firstToken);
}

// Groups of G consecutive flushed tokens x one channel; blocks of G tokens
// outer, channels inner (the group order of groupOf).
void CacheSide::quantizeTokenSpan(const std::vector<float> &rows,
                                  int firstToken) {
  const int d = headDim_;
  const int g = scheme().groupSize;
  const int u = config_.flushUnit;
  std::vector<float> x(g);
  for (int block = 0; block < u / g; ++block) {
    for (int c = 0; c < d; ++c) {
      for (int k = 0; k < g; ++k)
        x[k] = rows[size_t(block * g + k) * d + c];
      QuantizedGroup group = quantizeGroup(groupScheme(c), x.data(), g);
      for (int k = 0; k < g; ++k)
        codes_[size_t(firstToken + block * g + k) * d + c] = group.codes[k];
      scales_.push_back(group.scale);
      saturated_ += group.saturated;
      zeros_.push_back(group.zero);
    }
  }
}

// Each flushed token's D channels, in reordered position order, split into
// its groups (D / G of G without reorder), in token order. Codes are kept
// by channel (codes_), so the reorder is invisible to dequantized().
void CacheSide::quantizeChannelSpan(const std::vector<float> &rows,
                                    int firstToken) {
  const int d = headDim_;
  const int u = config_.flushUnit;
  std::vector<float> x;
  for (int t = 0; t < u; ++t) {
    for (int g = 0; g < groupsPerToken(); ++g) {
      x.clear();
      for (int k = 0; k < groupSize(g); ++k)
        x.push_back(rows[size_t(t) * d + channelAt(groupStart(g) + k)]);
      QuantizedGroup group =
          quantizeGroup(groupScheme(g), x.data(), int(x.size()));
      for (int k = 0; k < groupSize(g); ++k)
        codes_[size_t(firstToken + t) * d + channelAt(groupStart(g) + k)] =
            group.codes[k];
      scales_.push_back(group.scale);
      saturated_ += group.saturated;
      zeros_.push_back(group.zero);
    }
  }
}

Region CacheSide::regionOf(int token) const {
  if (token < 0 || token >= numTokens())
    fatalError("token out of range");
  if (token < numSink())
    return Region::Sink;
  if (token < numSink() + numQuantized_)
    return Region::Quantized;
  return Region::Window;
}

int CacheSide::groupOf(int quantizedToken, int channel) const {
  const int g = scheme().groupSize;
  if (scheme().span == Span::Tokens)
    return (quantizedToken / g) * headDim_ + channel;
  if (config_.perm.empty())
    return quantizedToken * groupsPerToken() + channel / g;
  return quantizedToken * groupsPerToken() + positionGroup_[position_[channel]];
}

std::vector<uint32_t> CacheSide::groupCodes(int group) const {
  if (group < 0 || group >= numGroups())
    fatalError("group out of range");
  const int d = headDim_;
  const int g = scheme().groupSize;
  std::vector<uint32_t> result;
  if (scheme().span == Span::Tokens) {
    int block = group / d, c = group % d;
    for (int k = 0; k < g; ++k)
      result.push_back(codes_[size_t(block * g + k) * d + c]);
  } else {
    int token = group / groupsPerToken(), inToken = group % groupsPerToken();
    for (int k = 0; k < groupSize(inToken); ++k)
      result.push_back(
          codes_[size_t(token) * d + channelAt(groupStart(inToken) + k)]);
  }
  return result;
}

std::vector<uint32_t> CacheSide::packedGroup(int group) const {
  std::vector<uint32_t> codes = groupCodes(group);
  return packCodes(codes.data(), int(codes.size()), scheme().bits);
}

std::vector<uint32_t> CacheSide::packedCodes() const {
  std::vector<uint32_t> all;
  for (int group = 0; group < numGroups(); ++group) {
    std::vector<uint32_t> words = packedGroup(group);
    all.insert(all.end(), words.begin(), words.end());
  }
  return all;
}

float CacheSide::dequantizedAt(int quantizedToken, int channel) const {
  int group = groupOf(quantizedToken, channel);
  return dequantize(scheme(),
                    codes_[size_t(quantizedToken) * headDim_ + channel],
                    scales_[group], zeros_[group]);
}

std::vector<float> CacheSide::dequantized() const {
  const int d = headDim_;
  std::vector<float> out(sink_);
  out.reserve(size_t(numTokens()) * d);
  std::vector<double> row(d);
  for (int i = 0; i < numQuantized_; ++i) {
    for (int c = 0; c < d; ++c)
      row[c] = double(dequantizedAt(i, c));
    if (config_.rotation.enabled)
      rotateInverse(config_.rotation, row.data(), d);
    for (int c = 0; c < d; ++c)
      out.push_back(float(row[c]));
  }
  out.insert(out.end(), window_.begin(), window_.end());
  return out;
}

//===----------------------------------------------------------------------===//
// Slice
//===----------------------------------------------------------------------===//

Slice::Slice(const SliceConfig &config)
    : config_(config), keys_(config.key, config.headDim),
      values_(config.value, config.headDim),
      pool_(config.pool, config.headDim) {
  std::string error = validate(config);
  if (!error.empty())
    fatalError(error);
}

void Slice::append(const float *k, const float *v, int n) {
  if (n < 0)
    fatalError("negative append");
  if (n == 0)
    return;
  // kvq decision: the norms come from the first append (the prompt), sink
  // tokens included, and never change; later appends reuse them.
  if (config_.keyNorm && keys_.norms().empty())
    keys_.setNorms(computeKeyNorms(k, n, config_.headDim));
  if (pool_.enabled())
    return appendTracked(k, v, n);
  keys_.append(k, n);
  values_.append(v, n);
}

// Keys and values flush the same units (validate): each unit is tracked on
// copies of its rows, which the pool may change, and those are quantized.
void Slice::appendTracked(const float *k, const float *v, int n) {
  const int d = config_.headDim, u = config_.key.flushUnit;
  keys_.push(k, n);
  values_.push(v, n);
  int units = keys_.pendingUnits();
  for (int i = 0; i < units; ++i) {
    std::vector<float> kRows(keys_.windowRow(i * u),
                             keys_.windowRow(i * u) + size_t(u) * d);
    std::vector<float> vRows(values_.windowRow(i * u),
                             values_.windowRow(i * u) + size_t(u) * d);
    int position = keys_.numSink() + keys_.numQuantized();
    pool_.track(kRows.data(), vRows.data(), u, position);
    keys_.flushRows(kRows.data());
    values_.flushRows(vRows.data());
  }
  keys_.dropOldest(units * u);
  values_.dropOldest(units * u);
}

// Per query head, all in fp64:
//   qn[c]  = double(q[c]) * double(n_c)              (key norm only)
//   s_t    = scale * sum_c (qt[c] * double(k^[t][c])) in channel order, where
//            qt = qn for quantized key tokens under key norm, else q
//   m      = max_t s_t;  e_t = exp(s_t - m);  Z = sum_t e_t (token order)
//   out[c] = sum_t (e_t / Z) * double(v^[t][c])       (token order)
void Slice::attend(const float *q, int queryHeads, double scale, double *out,
                   bool rotateQuery, int visible) const {
  const int d = config_.headDim;
  std::fill(out, out + size_t(queryHeads) * d, 0.0);
  // The attended tokens in order: sink, quantized (not masked), window, then
  // the pool entries; each with its key, value and whether the key is
  // quantized (scored with the normalised query under key norm).
  std::vector<float> kHat = dequantizedKeys();
  std::vector<float> vHat = dequantizedValues();
  std::vector<const float *> keys, values;
  std::vector<bool> quantized;
  const int end = visible < 0 ? numTokens() : std::min(visible, numTokens());
  for (int t = 0; t < end; ++t) {
    bool isQuantized = keys_.regionOf(t) == Region::Quantized;
    if (isQuantized && pool_.isMasked(t))
      continue;
    keys.push_back(kHat.data() + size_t(t) * d);
    values.push_back(vHat.data() + size_t(t) * d);
    quantized.push_back(isQuantized);
  }
  for (const PoolEntry *entry : pool_.entries()) {
    if (entry->position >= end)
      continue;
    keys.push_back(entry->key.data());
    values.push_back(entry->value.data());
    quantized.push_back(false);
  }
  const int numT = int(keys.size());
  if (numT == 0)
    return;
  const std::vector<float> &norms = keyNorms();
  std::vector<double> qPlain(d), qNorm(d), scores(numT);
  // Pre-RoPE keys in fp64, rotated to their positions, the quantized ones
  // taken back to raw space first (then q meets them plain). No pool holds
  // them (the compiler rejects the combination), so attended token t is
  // position t.
  const bool rope = config_.rope.enabled();
  assert(!rope || !pool_.enabled());
  std::vector<double> rotated;
  if (rope)
    rotated.assign(kHat.begin(), kHat.end());
  for (int t = 0; rope && t < numT; ++t) {
    double *row = &rotated[size_t(t) * d];
    if (!norms.empty() && keys_.regionOf(t) == Region::Quantized)
      for (int c = 0; c < d; ++c)
        row[c] *= double(norms[c]);
    rotate(config_.rope, t, row);
  }

  for (int h = 0; h < queryHeads; ++h) {
    const float *qh = q + size_t(h) * d;
    for (int c = 0; c < d; ++c) {
      qPlain[c] = double(qh[c]);
      qNorm[c] = norms.empty() ? qPlain[c] : qPlain[c] * double(norms[c]);
    }
    if (rope && rotateQuery)
      rotate(config_.rope, numT - 1, qPlain.data());
    for (int t = 0; t < numT; ++t) {
      double dot = 0.0;
      if (rope) {
        for (int c = 0; c < d; ++c)
          dot += qPlain[c] * rotated[size_t(t) * d + c];
      } else {
        const std::vector<double> &qt = quantized[t] ? qNorm : qPlain;
        for (int c = 0; c < d; ++c)
          dot += qt[c] * double(keys[t][c]);
      }
      scores[t] = scale * dot;
    }
    double mx = *std::max_element(scores.begin(), scores.end());
    double z = 0.0;
    for (int t = 0; t < numT; ++t) {
      scores[t] = std::exp(scores[t] - mx);
      z += scores[t];
    }
    double *o = out + size_t(h) * d;
    for (int t = 0; t < numT; ++t) {
      double p = scores[t] / z;
      for (int c = 0; c < d; ++c)
        o[c] += p * double(values[t][c]);
    }
  }
}

} // namespace kvq::ref
