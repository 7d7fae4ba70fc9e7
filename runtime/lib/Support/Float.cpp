//===- Float.cpp - Bit-exact small float formats and rounding -------------===//
//
// Rounding is done on the exact value: scaling a double by a power of two is
// exact, so the significand to keep and the discarded fraction are computed
// exactly in double, and the rounding decision is made by hand.
//
//===----------------------------------------------------------------------===//

#include "kvq/Support/Float.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kvq::fp;

const FloatFormat FloatFormat::F32 = {23, 8, true, 0x7fffffffu};
const FloatFormat FloatFormat::F16 = {10, 5, true, 0x7fffu};
const FloatFormat FloatFormat::BF16 = {7, 8, true, 0x7fffu};
const FloatFormat FloatFormat::E4M3 = {3, 4, false, 0x7fu};
const FloatFormat FloatFormat::E5M2 = {2, 5, true, 0x7fu};

double FloatFormat::maxFinite() const {
  int MaxExp = HasInfinity ? (1 << ExponentBits) - 2 - bias()
                           : (1 << ExponentBits) - 1 - bias();
  // e4m3: the top exponent keeps mantissas 000..110; 111 is NaN.
  double MaxMant = HasInfinity ? 2.0 - std::ldexp(1.0, -MantissaBits)
                               : 2.0 - std::ldexp(2.0, -MantissaBits);
  return std::ldexp(MaxMant, MaxExp);
}

/// True when rounding the magnitude N + Frac (Frac in [0, 1)) away from zero
/// is required by Mode for a value of sign Negative.
static bool roundsUp(double N, double Frac, bool Negative, RoundingMode Mode) {
  if (Frac == 0)
    return false;
  switch (Mode) {
  case RoundingMode::NearestEven:
    return Frac > 0.5 || (Frac == 0.5 && std::fmod(N, 2.0) != 0);
  case RoundingMode::NearestAway:
    return Frac >= 0.5;
  case RoundingMode::TowardZero:
    return false;
  case RoundingMode::Down:
    return Negative;
  case RoundingMode::Up:
    return !Negative;
  }
  return false;
}

/// The encoding of an overflowing result of sign Negative.
static uint32_t overflowBits(const FloatFormat &F, bool Negative,
                             RoundingMode Mode, bool SatFinite) {
  uint32_t Sign = Negative ? 1u << (F.totalBits() - 1) : 0;
  uint32_t MaxBits = encodeFloat(F.maxFinite(), F, RoundingMode::TowardZero);
  bool ToInfinity = Mode == RoundingMode::NearestEven ||
                    Mode == RoundingMode::NearestAway ||
                    (Mode == RoundingMode::Down && Negative) ||
                    (Mode == RoundingMode::Up && !Negative);
  if (!ToInfinity || SatFinite)
    return Sign | MaxBits;
  if (!F.HasInfinity)
    return Sign | F.CanonicalNaN;
  return Sign | (((1u << F.ExponentBits) - 1) << F.MantissaBits);
}

uint32_t kvq::fp::encodeFloat(double V, const FloatFormat &F, RoundingMode Mode,
                              bool SatFinite) {
  if (std::isnan(V))
    return F.CanonicalNaN;
  bool Negative = std::signbit(V);
  uint32_t Sign = Negative ? 1u << (F.totalBits() - 1) : 0;
  double A = std::fabs(V);
  if (std::isinf(A))
    return overflowBits(F, Negative, RoundingMode::NearestEven, SatFinite);
  if (A == 0)
    return Sign;
  int MinExp = 1 - F.bias();
  int Exp = std::ilogb(A);
  int QuantumExp = (Exp < MinExp ? MinExp : Exp) - F.MantissaBits;
  double Scaled = std::ldexp(A, -QuantumExp);
  double N = std::floor(Scaled);
  if (roundsUp(N, Scaled - N, Negative, Mode))
    N += 1;
  double R = std::ldexp(N, QuantumExp);
  if (R > F.maxFinite())
    return overflowBits(F, Negative, Mode, SatFinite);
  if (R == 0)
    return Sign;
  int RExp = std::ilogb(R);
  if (RExp < MinExp) // Subnormal: exponent field zero.
    return Sign | static_cast<uint32_t>(N);
  uint32_t Mant = static_cast<uint32_t>(std::ldexp(R, F.MantissaBits - RExp) -
                                        std::ldexp(1.0, F.MantissaBits));
  uint32_t ExpField = static_cast<uint32_t>(RExp + F.bias());
  return Sign | (ExpField << F.MantissaBits) | Mant;
}

double kvq::fp::decodeFloat(uint32_t Bits, const FloatFormat &F) {
  bool Negative = (Bits >> (F.totalBits() - 1)) & 1;
  uint32_t ExpField = (Bits >> F.MantissaBits) & ((1u << F.ExponentBits) - 1);
  uint32_t Mant = Bits & ((1u << F.MantissaBits) - 1);
  uint32_t MaxField = (1u << F.ExponentBits) - 1;
  double R;
  if (F.HasInfinity && ExpField == MaxField)
    R = Mant ? std::numeric_limits<double>::quiet_NaN()
             : std::numeric_limits<double>::infinity();
  else if (!F.HasInfinity && ExpField == MaxField &&
           Mant == (1u << F.MantissaBits) - 1)
    R = std::numeric_limits<double>::quiet_NaN();
  else if (ExpField == 0)
    R = std::ldexp(static_cast<double>(Mant), 1 - F.bias() - F.MantissaBits);
  else
    R = std::ldexp(static_cast<double>(Mant | (1u << F.MantissaBits)),
                   static_cast<int>(ExpField) - F.bias() - F.MantissaBits);
  return Negative ? -R : R;
}

/// Makes R (the nearest double to a value whose error against R has sign
/// ErrSign) the round-to-odd double: if inexact and R's last bit is even,
/// step one ulp toward the true value.
static double makeOdd(double R, double ErrSign) {
  if (ErrSign == 0 || std::isinf(R) || std::isnan(R))
    return R;
  uint64_t Bits;
  std::memcpy(&Bits, &R, 8);
  if (Bits & 1)
    return R;
  return std::nextafter(R, ErrSign > 0 ? INFINITY : -INFINITY);
}

double kvq::fp::addRoundToOdd(double A, double B) {
  double S = A + B;
  if (!std::isfinite(S))
    return S;
  // TwoSum: the exact error of the rounded sum.
  double Bv = S - A;
  double Err = (A - (S - Bv)) + (B - Bv);
  return makeOdd(S, Err);
}

double kvq::fp::fmaRoundToOddNarrow(double A, double B, double C) {
  return addRoundToOdd(A * B, C);
}

double kvq::fp::divRoundToOdd(double A, double B) {
  double Q = A / B;
  if (!std::isfinite(Q) || Q == 0)
    return Q;
  double Rem = std::fma(-Q, B, A);
  return makeOdd(Q, B > 0 ? Rem : -Rem);
}

double kvq::fp::sqrtRoundToOdd(double A) {
  double Q = std::sqrt(A);
  if (!std::isfinite(Q) || Q == 0)
    return Q;
  return makeOdd(Q, std::fma(-Q, Q, A));
}

double kvq::fp::intRoundToOdd(int64_t V) {
  double D = static_cast<double>(V);
  __int128 Err = static_cast<__int128>(V) - static_cast<__int128>(D);
  return makeOdd(D, Err > 0 ? 1.0 : (Err < 0 ? -1.0 : 0.0));
}

double kvq::fp::uintRoundToOdd(uint64_t V) {
  double D = static_cast<double>(V);
  __int128 Err = static_cast<__int128>(V) - static_cast<__int128>(D);
  return makeOdd(D, Err > 0 ? 1.0 : (Err < 0 ? -1.0 : 0.0));
}

/// Adjusts the round-to-nearest result R whose exact error has sign ErrSign
/// to the directed Mode.
static double directed(double R, double ErrSign, RoundingMode Mode) {
  if (ErrSign == 0 || std::isnan(R) || Mode == RoundingMode::NearestEven ||
      Mode == RoundingMode::NearestAway)
    return R;
  bool TrueIsAbove = ErrSign > 0;
  switch (Mode) {
  case RoundingMode::Down:
    return TrueIsAbove ? R : std::nextafter(R, -INFINITY);
  case RoundingMode::Up:
    return TrueIsAbove ? std::nextafter(R, INFINITY) : R;
  case RoundingMode::TowardZero:
    if (R > 0)
      return TrueIsAbove ? R : std::nextafter(R, 0.0);
    return TrueIsAbove ? std::nextafter(R, 0.0) : R;
  default:
    return R;
  }
}

double kvq::fp::roundDoubleAdd(double A, double B, RoundingMode Mode) {
  double S = A + B;
  if (!std::isfinite(S))
    return S;
  double Bv = S - A;
  return directed(S, (A - (S - Bv)) + (B - Bv), Mode);
}

double kvq::fp::roundDoubleMul(double A, double B, RoundingMode Mode) {
  double P = A * B;
  if (!std::isfinite(P))
    return P;
  return directed(P, std::fma(A, B, -P), Mode);
}

double kvq::fp::roundDoubleDiv(double A, double B, RoundingMode Mode) {
  double Q = A / B;
  if (!std::isfinite(Q))
    return Q;
  double Rem = std::fma(-Q, B, A);
  return directed(Q, B > 0 ? Rem : -Rem, Mode);
}

double kvq::fp::roundDoubleSqrt(double A, RoundingMode Mode) {
  double Q = std::sqrt(A);
  if (!std::isfinite(Q))
    return Q;
  return directed(Q, std::fma(-Q, Q, A), Mode);
}

double kvq::fp::roundDoubleFromInt(int64_t V, bool IsSigned,
                                   RoundingMode Mode) {
  __int128 Exact = IsSigned ? static_cast<__int128>(V)
                            : static_cast<__int128>(static_cast<uint64_t>(V));
  double D = IsSigned ? static_cast<double>(V)
                      : static_cast<double>(static_cast<uint64_t>(V));
  __int128 Err = Exact - static_cast<__int128>(D);
  return directed(D, Err > 0 ? 1.0 : (Err < 0 ? -1.0 : 0.0), Mode);
}

static uint32_t bitsOf(float X) {
  uint32_t B;
  std::memcpy(&B, &X, 4);
  return B;
}

static float floatOf(uint32_t B) {
  float X;
  std::memcpy(&X, &B, 4);
  return X;
}

/// Rounds `value` right by `shift` bits, to nearest, ties to even.
static uint32_t shiftRoundEven(uint32_t value, unsigned shift) {
  uint32_t kept = value >> shift, rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1)));
}

uint16_t kvq::fp::floatToHalfNearest(float F) {
  uint32_t B = bitsOf(F);
  uint16_t Sign = uint16_t((B >> 16) & 0x8000);
  uint32_t Exp = (B >> 23) & 0xff, Man = B & 0x7fffff;
  if (Exp == 0xff)
    return Man ? uint16_t(FloatFormat::F16.CanonicalNaN) : Sign | 0x7c00;
  int E = int(Exp) - 127 + 15;
  if (E >= 31)
    return Sign | 0x7c00;
  if (E <= 0) // f16 subnormal or zero: the significand times 2^-24
    return E < -10
               ? Sign
               : Sign |
                     uint16_t(shiftRoundEven(Man | 0x800000, unsigned(14 - E)));
  // A carry out of the mantissa correctly bumps the exponent (up to inf).
  return Sign | uint16_t((uint32_t(E) << 10) + shiftRoundEven(Man, 13));
}

uint16_t kvq::fp::floatToBF16Nearest(float F) {
  uint32_t B = bitsOf(F);
  if ((B & 0x7f800000) == 0x7f800000 && (B & 0x7fffff))
    return uint16_t(FloatFormat::BF16.CanonicalNaN);
  // Sign and exponent ride along; a carry correctly bumps the exponent.
  return uint16_t(shiftRoundEven(B, 16));
}

float kvq::fp::halfToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  uint32_t Exp = (H >> 10) & 0x1f, Man = H & 0x3ff;
  if (Exp == 0x1f)
    return floatOf(Sign | 0x7f800000 | (Man << 13));
  if (Exp == 0) {
    float V = float(Man) * (1.0f / 16777216.0f); // Man * 2^-24, exact
    return Sign ? -V : V;
  }
  return floatOf(Sign | ((Exp + 112) << 23) | (Man << 13));
}

float kvq::fp::bf16ToFloat(uint16_t H) { return floatOf(uint32_t(H) << 16); }
float kvq::fp::e4m3ToFloat(uint8_t B) {
  return static_cast<float>(decodeFloat(B, FloatFormat::E4M3));
}
