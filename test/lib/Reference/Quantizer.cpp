//===- Quantizer.cpp - Per-group quantizers of the reference ----*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// Every expression below is evaluated in IEEE fp32, one rounding per
// operation, left to right as written: no FMA (-ffp-contract=off), true
// division, std::nearbyint under the default rounding mode for rne. The
// comments spell out the order because kernels must reproduce these bits.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvq::ref {

void fatalError(const std::string &message) {
  std::fprintf(stderr, "kvq reference: %s\n", message.c_str());
  std::abort();
}

std::string validate(const QuantScheme &scheme) {
  if (scheme.bits < 1 || scheme.bits > 16)
    return "bits must be in [1, 16]";
  if (scheme.groupSize < 1)
    return "group size must be positive";
  if (scheme.mode != Mode::Asym && scheme.bits < 2)
    return "sym and hybrid need at least 2 bits";
  if (scheme.levels != 0 &&
      (scheme.levels < 2 || scheme.levels > (1 << scheme.bits)))
    return "levels must be 0 or in [2, 2^bits]";
  if (scheme.mode == Mode::Sym && scheme.levels != 0)
    return "levels apply to asymmetric quantization only";
  if (!(scheme.eta >= 0.0 && scheme.eta < 0.5))
    return "eta must be in [0, 0.5)";
  if (scheme.mode == Mode::Sym && scheme.eta != 0.0)
    return "eta applies to asymmetric quantization only";
  if (!(scheme.clip > 0.0f && scheme.clip <= 1.0f))
    return "clip must be in (0, 1]";
  return "";
}

namespace {

void checkGroup(const QuantScheme &scheme, const float *x, int n) {
  std::string error = validate(scheme);
  if (!error.empty())
    fatalError(error);
  if (n < 1)
    fatalError("a group needs at least one element");
  for (int i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      fatalError("quantizer input must be finite");
}

/// +0 for either zero, else \p x.
float positiveZero(float x) { return x == 0.0f ? 0.0f : x; }

/// clamp(rne(v), lo, hi) as an integer. v may be +-inf (a huge quotient).
int roundClamp(float v, int lo, int hi) {
  float r = std::nearbyint(v);
  r = std::min(std::max(r, float(lo)), float(hi));
  return int(r);
}

} // namespace

// asym with L levels, clip a, eta, dtype store():
//   lo = a * min_i x[i]                    (fp32 product; a = 1 is exact)
//   hi = a * max_i x[i]                    (a -0 min or max counts as +0)
//   s' = (hi - lo) / float(L - 1)          (subtract, then true division)
// eta = 0: the stored parameters are s = store(s'), z = store(lo), and
//   c  = s == 0 ? 0 : clamp(rne((x - z) / s), 0, L - 1)
// eta != 0: codes come from the uncalibrated fp32 parameters s = s',
//   z = lo (never stored, so never rounded), and the calibration is fp32
//   from them, each stored parameter rounded once:
//   kz = float(eta * (L - 1)),  ks = float(1 - 2 * eta)   (fp64, rounded once)
//   zero  = store(z + kz * s)              (multiply, then add)
//   scale = store(ks * s)
// store() saturates; the group is `saturated` if a stored value did.
QuantizedGroup quantizeAsym(const QuantScheme &scheme, const float *x, int n) {
  checkGroup(scheme, x, n);
  const int maxCode = scheme.numLevels() - 1;
  // Zeros of either sign read as +0, so that the sign of a zero z does not
  // depend on which of -0 / +0 a backend's min reduction returns.
  float mn = positiveZero(*std::min_element(x, x + n));
  float mx = positiveZero(*std::max_element(x, x + n));
  float lo = scheme.clip * mn;
  float hi = scheme.clip * mx;
  float s = (hi - lo) / float(maxCode);
  float z = lo;
  float storedScale = s, storedZero = z;
  if (scheme.eta != 0.0) {
    float kz = float(scheme.eta * double(maxCode));
    float ks = float(1.0 - 2.0 * scheme.eta);
    float kzs = kz * s;
    storedZero = z + kzs;
    storedScale = ks * s;
  }
  QuantizedGroup group;
  group.saturated = exceedsParam(storedScale, scheme.params) ||
                    exceedsParam(storedZero, scheme.params);
  group.scale = storeParam(storedScale, scheme.params);
  group.zero = storeParam(storedZero, scheme.params);
  if (scheme.eta == 0.0) {
    s = group.scale;
    z = group.zero;
  }
  group.codes.assign(n, 0);
  if (s != 0.0f)
    for (int i = 0; i < n; ++i)
      group.codes[i] = uint32_t(roundClamp((x[i] - z) / s, 0, maxCode));
  return group;
}

// sym, b bits, m = 2^(b-1) - 1, clip a:
//   amax = a * max_i |x[i]|
//   s    = store(amax / float(m))
//   c    = s == 0 ? 0 : clamp(rne(x / s), -m, m);  stored as c + 2^(b-1)
//   zero = +0
QuantizedGroup quantizeSym(const QuantScheme &scheme, const float *x, int n) {
  checkGroup(scheme, x, n);
  const int offset = 1 << (scheme.bits - 1);
  const int maxMag = offset - 1;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  amax = scheme.clip * amax;
  float unrounded = amax / float(maxMag);
  float s = storeParam(unrounded, scheme.params);

  QuantizedGroup group;
  group.saturated = exceedsParam(unrounded, scheme.params);
  group.codes.assign(n, uint32_t(offset));
  if (s != 0.0f)
    for (int i = 0; i < n; ++i)
      group.codes[i] = uint32_t(roundClamp(x[i] / s, -maxMag, maxMag) + offset);
  group.scale = s;
  group.zero = 0.0f;
  return group;
}

// hybrid: both halves; SSE of each reconstruction (as dequantize() gives it,
// calibrated parameters included) in fp64; asym only if strictly smaller.
// The asym group is stored with its scale negated (exact in every dtype).
QuantizedGroup quantizeHybrid(const QuantScheme &scheme, const float *x,
                              int n) {
  QuantizedGroup sym = quantizeSym(scheme, x, n);
  QuantizedGroup asym = quantizeAsym(scheme, x, n);
  asym.scale = -asym.scale;
  std::vector<float> xhat(n);
  dequantizeGroup(scheme, sym, xhat.data());
  double symError = squaredError(x, xhat.data(), n);
  dequantizeGroup(scheme, asym, xhat.data());
  double asymError = squaredError(x, xhat.data(), n);
  return asymError < symError ? asym : sym;
}

QuantizedGroup quantizeGroup(const QuantScheme &scheme, const float *x, int n) {
  switch (scheme.mode) {
  case Mode::Asym:
    return quantizeAsym(scheme, x, n);
  case Mode::Sym:
    return quantizeSym(scheme, x, n);
  case Mode::Hybrid:
    return quantizeHybrid(scheme, x, n);
  }
  fatalError("unknown mode");
}

// asym: float(c) * s + z (multiply, then add); sym: float(c - 2^(b-1)) * s.
// Hybrid: sign bit of the stored scale set = asym with s = -scale.
float dequantize(const QuantScheme &scheme, uint32_t code, float scale,
                 float zero) {
  bool asym = scheme.mode == Mode::Asym ||
              (scheme.mode == Mode::Hybrid && std::signbit(scale));
  if (asym) {
    float s = scheme.mode == Mode::Hybrid ? -scale : scale;
    float cs = float(code) * s;
    return cs + zero;
  }
  int offset = 1 << (scheme.bits - 1);
  return float(int(code) - offset) * scale;
}

void dequantizeGroup(const QuantScheme &scheme, const QuantizedGroup &group,
                     float *out) {
  for (size_t i = 0; i < group.codes.size(); ++i)
    out[i] = dequantize(scheme, group.codes[i], group.scale, group.zero);
}

double squaredError(const float *x, const float *xhat, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    double d = double(x[i]) - double(xhat[i]);
    sum += d * d;
  }
  return sum;
}

} // namespace kvq::ref
