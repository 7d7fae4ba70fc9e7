//===- Float.h - Bit-exact small float formats and rounding ----*- C++ -*-===//
//
// Software conversions between double and the binary float formats PTX uses
// (f32, f16, bf16, e4m3, e5m2), in every IEEE rounding direction, with the
// saturating variants PTX defines. They are independent of the host's
// rounding mode: the PTX interpreter's cvt is built on them, and the runtime
// converts host data to the model dtype with them.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_SUPPORT_FLOAT_H
#define KVQ_SUPPORT_FLOAT_H

#include <cstdint>

namespace kvq::fp {

enum class RoundingMode : uint8_t {
  NearestEven, ///< .rn
  TowardZero,  ///< .rz
  Down,        ///< .rm (toward -infinity)
  Up,          ///< .rp (toward +infinity)
  NearestAway, ///< .rna (ties away from zero)
};

/// A binary floating-point format with an implicit leading bit.
struct FloatFormat {
  int MantissaBits;
  int ExponentBits;
  /// False for e4m3 ("fn" variant): no infinities, the all-ones pattern is
  /// the only NaN and the largest finite value is 448.
  bool HasInfinity;
  /// The canonical NaN pattern produced for NaN results (sign bit clear).
  uint32_t CanonicalNaN;

  int bias() const { return (1 << (ExponentBits - 1)) - 1; }
  int totalBits() const { return 1 + ExponentBits + MantissaBits; }
  double maxFinite() const;

  static const FloatFormat F32, F16, BF16, E4M3, E5M2;
};

/// Rounds V to Format. V must be the exact value or a round-to-odd
/// approximation with at least two more bits than Format (see roundToOdd*),
/// so that the result is correctly rounded. SatFinite maps results that
/// would be infinite (or NaN for overflow in formats without infinity) to
/// the largest finite value of the same sign; NaN stays NaN.
uint32_t encodeFloat(double V, const FloatFormat &Format, RoundingMode Mode,
                     bool SatFinite = false);
/// The exact value of Bits in Format.
double decodeFloat(uint32_t Bits, const FloatFormat &Format);

/// a + b rounded to odd in double: correct to re-round to any format with at
/// most 51 significand bits.
double addRoundToOdd(double A, double B);
/// a * b + c rounded to odd, for a, b, c with at most 26 significand bits
/// (so that a * b is exact in double).
double fmaRoundToOddNarrow(double A, double B, double C);
/// a / b rounded to odd.
double divRoundToOdd(double A, double B);
/// sqrt(a) rounded to odd.
double sqrtRoundToOdd(double A);
/// A 64-bit integer rounded to odd in double.
double intRoundToOdd(int64_t V);
double uintRoundToOdd(uint64_t V);

/// Double-precision results with a directed rounding mode, from the
/// round-to-nearest result plus the exact sign of its error.
double roundDoubleAdd(double A, double B, RoundingMode Mode);
double roundDoubleMul(double A, double B, RoundingMode Mode);
double roundDoubleDiv(double A, double B, RoundingMode Mode);
double roundDoubleSqrt(double A, RoundingMode Mode);
double roundDoubleFromInt(int64_t V, bool IsSigned, RoundingMode Mode);

/// fp32 -> f16 / bf16 with round-to-nearest-even and no saturation, by bit
/// manipulation: the hot path of host-side conversions (the runtime converts
/// every fp32 key and value). Same results as encodeFloat, canonical NaN.
uint16_t floatToHalfNearest(float F);
uint16_t floatToBF16Nearest(float F);

// Convenience wrappers used by tests, the interpreter and the runtime.
inline uint16_t floatToHalf(float F, RoundingMode M = RoundingMode::NearestEven,
                            bool Sat = false) {
  if (M == RoundingMode::NearestEven && !Sat)
    return floatToHalfNearest(F);
  return encodeFloat(F, FloatFormat::F16, M, Sat);
}
inline uint16_t floatToBF16(float F, RoundingMode M = RoundingMode::NearestEven,
                            bool Sat = false) {
  if (M == RoundingMode::NearestEven && !Sat)
    return floatToBF16Nearest(F);
  return encodeFloat(F, FloatFormat::BF16, M, Sat);
}
inline uint8_t floatToE4M3(float F, RoundingMode M = RoundingMode::NearestEven,
                           bool Sat = true) {
  return encodeFloat(F, FloatFormat::E4M3, M, Sat);
}
float halfToFloat(uint16_t H);
float bf16ToFloat(uint16_t H);
float e4m3ToFloat(uint8_t B);

} // namespace kvq::fp

#endif // KVQ_SUPPORT_FLOAT_H
