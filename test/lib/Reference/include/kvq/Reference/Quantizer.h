//===- Quantizer.h - Per-group quantizers of the reference ------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// numerics.md section 3, one group at a time. Every step is one IEEE fp32
// operation in the order written in Quantizer.cpp (the library is compiled
// with -ffp-contract=off), so kernels can reproduce codes and stored
// parameters bit for bit. docs/Numerics.md lists the decisions taken where
// the contract leaves a choice.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_QUANTIZER_H
#define KVQ_REFERENCE_QUANTIZER_H

#include "kvq/Reference/FloatFormats.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::ref {

/// The axis a group spans (numerics.md section 2).
enum class Span {
  /// One channel across G consecutive tokens (KIVI keys, InnerQ values).
  Tokens,
  /// One token across G consecutive channels (KIVI values, InnerQ keys).
  Channels,
};

enum class Mode { Asym, Sym, Hybrid };

struct QuantScheme {
  /// Stored bits per code, 1..16 (sym and hybrid need >= 2).
  int bits = 2;
  Span span = Span::Tokens;
  int groupSize = 32;
  Mode mode = Mode::Asym;
  ParamType params = ParamType::F16;
  /// Levels of the asymmetric quantizer (also hybrid's asym half); 0 means
  /// 2^bits. SKVQ's ternary values are bits = 2, levels = 3.
  int levels = 0;
  /// XQuant's data-free calibration, in [0, 0.5); asym and hybrid only.
  double eta = 0.0;
  /// Range factor `a` of clipped asym, in (0, 1]; 1 = no clipping. It also
  /// scales max|g| for sym (see docs/Numerics.md).
  float clip = 1.0f;

  /// The number of asymmetric levels L (levels, or 2^bits when 0).
  int numLevels() const { return levels ? levels : 1 << bits; }
};

/// Returns an empty string if \p scheme is valid, else why it is not.
std::string validate(const QuantScheme &scheme);

/// One quantized group: codes as stored (unsigned) and parameters as stored
/// (fp32 values already rounded to the scheme's ParamType).
struct QuantizedGroup {
  std::vector<uint32_t> codes;
  /// Hybrid: negative (sign bit set, -0 included) = the asym branch.
  float scale = 0.0f;
  /// Sym and hybrid's sym groups store +0.
  float zero = 0.0f;
  /// A stored parameter saturated at its dtype's largest finite value.
  bool saturated = false;
};

/// Quantizes x[0..n) as one group with \p scheme's mode. \p n may differ
/// from scheme.groupSize (variable group sizes); inputs must be finite.
QuantizedGroup quantizeGroup(const QuantScheme &scheme, const float *x, int n);

/// The two halves of hybrid, usable on their own. Both ignore scheme.mode.
/// quantizeAsym applies clip, levels and eta; quantizeSym applies clip.
QuantizedGroup quantizeAsym(const QuantScheme &scheme, const float *x, int n);
QuantizedGroup quantizeSym(const QuantScheme &scheme, const float *x, int n);
/// Hybrid regardless of scheme.mode (the returned scale is signed as
/// hybrid stores it).
QuantizedGroup quantizeHybrid(const QuantScheme &scheme, const float *x, int n);

/// Reconstructs one element in fp32: asym `c * s + z`; sym
/// `(c - 2^(b-1)) * s`; hybrid by the sign bit of \p scale.
float dequantize(const QuantScheme &scheme, uint32_t code, float scale,
                 float zero);

/// Reconstructs a whole group into out[0..codes.size()).
void dequantizeGroup(const QuantScheme &scheme, const QuantizedGroup &group,
                     float *out);

/// Sum over i, in index order, of (double(x[i]) - double(xhat[i]))^2 in
/// fp64: hybrid's selection criterion.
double squaredError(const float *x, const float *xhat, int n);

/// Prints \p message to stderr and aborts: the reference has no recoverable
/// errors (a bad configuration is a bug in the test that built it).
[[noreturn]] void fatalError(const std::string &message);

} // namespace kvq::ref

#endif // KVQ_REFERENCE_QUANTIZER_H
