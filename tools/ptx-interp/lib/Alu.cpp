//===- Alu.cpp - Per-lane evaluation of pure PTX instructions -------------===//
//
// Results follow the PTX ISA: exact IEEE results for instructions that
// define them (host float/double arithmetic where it is already correctly
// rounded to nearest, round-to-odd in double plus software rounding for the
// directed modes and the narrow formats), and approximate instructions
// computed in double and rounded once, which is within every PTX bound.
//
//===----------------------------------------------------------------------===//

#include "Alu.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kvq::ptx;

//===----------------------------------------------------------------------===//
// Bit helpers
//===----------------------------------------------------------------------===//

namespace {

float asF32(uint64_t V) {
  uint32_t B = static_cast<uint32_t>(V);
  float F;
  std::memcpy(&F, &B, 4);
  return F;
}
double asF64(uint64_t V) {
  double D;
  std::memcpy(&D, &V, 8);
  return D;
}
uint64_t bitsF32(float F) {
  uint32_t B;
  std::memcpy(&B, &F, 4);
  return B;
}
uint64_t bitsF64(double D) {
  uint64_t B;
  std::memcpy(&B, &D, 8);
  return B;
}

uint64_t maskBits(unsigned Bits) {
  return Bits >= 64 ? ~0ull : (1ull << Bits) - 1;
}

const FloatFormat &formatOf(Type T) {
  switch (T) {
  case Type::F16:
  case Type::F16x2:
    return FloatFormat::F16;
  case Type::BF16:
  case Type::BF16x2:
    return FloatFormat::BF16;
  case Type::E4M3x2:
    return FloatFormat::E4M3;
  case Type::E5M2x2:
    return FloatFormat::E5M2;
  default:
    return FloatFormat::F32;
  }
}

bool isPacked(Type T) {
  return T == Type::F16x2 || T == Type::BF16x2 || T == Type::E4M3x2 ||
         T == Type::E5M2x2;
}
bool isHalfLike(Type T) {
  return T == Type::F16 || T == Type::F16x2 || T == Type::BF16 ||
         T == Type::BF16x2;
}

/// Flushes a subnormal float to a zero of the same sign.
float flushF32(float F) {
  return std::fpclassify(F) == FP_SUBNORMAL ? std::copysign(0.0f, F) : F;
}

/// The element width of a (possibly packed) float type.
unsigned elemBits(Type T) {
  return isPacked(T) ? typeBits(T) / 2 : typeBits(T);
}

/// Decodes one element of a float type to double (exact).
double decodeElem(uint64_t Bits, Type T, bool Ftz) {
  if (T == Type::F64)
    return asF64(Bits);
  if (T == Type::F32) {
    float F = asF32(Bits);
    return Ftz ? flushF32(F) : F;
  }
  double D = decodeFloat(static_cast<uint32_t>(Bits & maskBits(elemBits(T))),
                         formatOf(T));
  if (Ftz && T != Type::BF16 && T != Type::BF16x2 && D != 0 &&
      std::fabs(D) < std::ldexp(1.0, 1 - formatOf(T).bias()))
    D = std::copysign(0.0, D);
  return D;
}

/// Rounds V (exact or round-to-odd) to one element of T.
uint64_t encodeElem(double V, Type T, RoundingMode Mode, bool Sat, bool Ftz) {
  if (Sat && (T == Type::F32 || T == Type::F64 || isHalfLike(T)))
    V = std::isnan(V) ? 0.0 : std::min(1.0, std::max(0.0, V));
  if (T == Type::F64)
    return bitsF64(V);
  bool SatFinite = Sat && (T == Type::E4M3x2 || T == Type::E5M2x2);
  uint64_t R = encodeFloat(V, formatOf(T), Mode, SatFinite);
  if (T == Type::F32 && Ftz)
    R = bitsF32(flushF32(asF32(R)));
  if (Ftz && (T == Type::F16 || T == Type::F16x2) && (R & 0x7c00) == 0)
    R &= 0x8000;
  return R;
}

uint64_t canonicalNaN(Type T) {
  if (T == Type::F64)
    return 0x7fffffffffffffffull;
  return formatOf(T).CanonicalNaN;
}

//===----------------------------------------------------------------------===//
// Floating point
//===----------------------------------------------------------------------===//

/// min/max with PTX semantics: a NaN operand is ignored unless both are NaN
/// (or .NaN is given); -0 orders below +0.
uint64_t minMaxElem(uint64_t A, uint64_t B, Type T, bool IsMax, bool PropNaN,
                    bool Ftz) {
  double X = decodeElem(A, T, Ftz), Y = decodeElem(B, T, Ftz);
  bool NA = std::isnan(X), NB = std::isnan(Y);
  if (NA || NB) {
    if (PropNaN || (NA && NB))
      return canonicalNaN(T);
    return encodeElem(NA ? Y : X, T, RoundingMode::NearestEven, false, Ftz);
  }
  bool PickX;
  if (X == Y)
    PickX = IsMax ? !std::signbit(X) : std::signbit(X);
  else
    PickX = IsMax ? X > Y : X < Y;
  return encodeElem(PickX ? X : Y, T, RoundingMode::NearestEven, false, Ftz);
}

/// Exact (or round-to-odd) value of a binary float operation in double.
double exactBinary(Opcode Op, double A, double B, double C) {
  switch (Op) {
  case Opcode::Add:
    return addRoundToOdd(A, B);
  case Opcode::Sub:
    return addRoundToOdd(A, -B);
  case Opcode::Mul:
    return A * B; // Exact for operands of at most 26 significand bits.
  case Opcode::Fma:
  case Opcode::Mad:
    return fmaRoundToOddNarrow(A, B, C);
  case Opcode::Div:
    return divRoundToOdd(A, B);
  default:
    return 0;
  }
}

/// f32 arithmetic: host arithmetic when round-to-nearest, else exact double
/// arithmetic re-rounded.
bool evalF32(const Instruction &I, const uint64_t *S, uint64_t &D,
             std::string &Err) {
  bool Ftz = I.has(FlagFtz), Sat = I.has(FlagSat);
  float A = asF32(S[1]), B = I.NumOps > 2 ? asF32(S[2]) : 0.f,
        C = I.NumOps > 3 ? asF32(S[3]) : 0.f;
  if (Ftz) {
    A = flushF32(A);
    B = flushF32(B);
    C = flushF32(C);
  }
  bool Nearest = I.Rnd == RoundingMode::NearestEven;
  float R;
  switch (I.Op) {
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Fma:
  case Opcode::Mad:
    if (Nearest) {
      R = I.Op == Opcode::Add   ? A + B
          : I.Op == Opcode::Sub ? A - B
          : I.Op == Opcode::Mul ? A * B
                                : std::fmaf(A, B, C);
    } else {
      double E = exactBinary(I.Op, A, B, C);
      R = asF32(encodeFloat(E, FloatFormat::F32, I.Rnd));
    }
    break;
  case Opcode::Div:
    if (I.has(FlagApprox) || Nearest) {
      // div.rn is IEEE; div.full/div.approx (max 2 ulp) are computed
      // correctly rounded, which is within their bounds.
      R = A / B;
    } else {
      R = asF32(encodeFloat(divRoundToOdd(A, B), FloatFormat::F32, I.Rnd));
    }
    break;
  case Opcode::Rcp:
    if (I.has(FlagApprox) || Nearest)
      R = static_cast<float>(1.0 / static_cast<double>(A));
    else
      R = asF32(encodeFloat(divRoundToOdd(1.0, A), FloatFormat::F32, I.Rnd));
    break;
  case Opcode::Sqrt:
    if (I.has(FlagApprox) || Nearest)
      R = std::sqrt(A);
    else
      R = asF32(encodeFloat(sqrtRoundToOdd(A), FloatFormat::F32, I.Rnd));
    break;
  case Opcode::Rsqrt:
    R = static_cast<float>(1.0 / std::sqrt(static_cast<double>(A)));
    break;
  case Opcode::Ex2:
    R = static_cast<float>(std::exp2(static_cast<double>(A)));
    break;
  case Opcode::Lg2:
    R = static_cast<float>(std::log2(static_cast<double>(A)));
    break;
  case Opcode::Sin:
    R = static_cast<float>(std::sin(static_cast<double>(A)));
    break;
  case Opcode::Cos:
    R = static_cast<float>(std::cos(static_cast<double>(A)));
    break;
  case Opcode::Tanh:
    R = static_cast<float>(std::tanh(static_cast<double>(A)));
    break;
  case Opcode::Abs:
    R = std::fabs(A);
    break;
  case Opcode::Neg:
    R = -A;
    break;
  case Opcode::Copysign:
    R = std::copysign(B, A);
    break;
  default:
    Err = "internal: not an f32 operation";
    return false;
  }
  if (std::isnan(R) && I.Op != Opcode::Neg && I.Op != Opcode::Abs &&
      I.Op != Opcode::Copysign)
    R = asF32(0x7fffffff);
  if (Ftz)
    R = flushF32(R);
  if (Sat)
    R = std::isnan(R) ? 0.f : std::min(1.f, std::max(0.f, R));
  D = bitsF32(R);
  return true;
}

bool evalF64(const Instruction &I, const uint64_t *S, uint64_t &D,
             std::string &Err) {
  double A = asF64(S[1]), B = I.NumOps > 2 ? asF64(S[2]) : 0,
         C = I.NumOps > 3 ? asF64(S[3]) : 0, R;
  RoundingMode M = I.Rnd;
  switch (I.Op) {
  case Opcode::Add:
    R = roundDoubleAdd(A, B, M);
    break;
  case Opcode::Sub:
    R = roundDoubleAdd(A, -B, M);
    break;
  case Opcode::Mul:
    R = roundDoubleMul(A, B, M);
    break;
  case Opcode::Fma:
  case Opcode::Mad:
    if (M != RoundingMode::NearestEven) {
      Err = "fma.f64 with a directed rounding mode is not supported";
      return false;
    }
    R = std::fma(A, B, C);
    break;
  case Opcode::Div:
    R = roundDoubleDiv(A, B, M);
    break;
  case Opcode::Rcp:
    R = I.has(FlagApprox) ? 1.0 / A : roundDoubleDiv(1.0, A, M);
    break;
  case Opcode::Sqrt:
    R = roundDoubleSqrt(A, M);
    break;
  case Opcode::Rsqrt:
    R = 1.0 / std::sqrt(A);
    break;
  case Opcode::Abs:
    R = std::fabs(A);
    break;
  case Opcode::Neg:
    R = -A;
    break;
  case Opcode::Copysign:
    R = std::copysign(B, A);
    break;
  default:
    Err = "unsupported f64 operation";
    return false;
  }
  if (std::isnan(R) && I.Op != Opcode::Neg && I.Op != Opcode::Abs &&
      I.Op != Opcode::Copysign)
    R = asF64(0x7fffffffffffffffull);
  D = bitsF64(R);
  return true;
}

/// f16/bf16 scalar and packed arithmetic, element by element.
bool evalHalf(const Instruction &I, const uint64_t *S, uint64_t &D,
              std::string &Err) {
  unsigned Elems = isPacked(I.Ty) ? 2 : 1;
  bool Ftz = I.has(FlagFtz);
  D = 0;
  for (unsigned E = 0; E < Elems; ++E) {
    auto Part = [&](unsigned K) { return (S[K] >> (16 * E)) & 0xffff; };
    uint64_t R;
    if (I.Op == Opcode::Neg) {
      R = Part(1) ^ 0x8000;
    } else if (I.Op == Opcode::Abs) {
      R = Part(1) & 0x7fff;
    } else if (I.Op == Opcode::Min || I.Op == Opcode::Max) {
      R = minMaxElem(Part(1), Part(2), I.Ty, I.Op == Opcode::Max,
                     I.has(FlagNaN), Ftz);
    } else if (I.Op == Opcode::Add || I.Op == Opcode::Sub ||
               I.Op == Opcode::Mul || I.Op == Opcode::Fma ||
               I.Op == Opcode::Mad) {
      double A = decodeElem(Part(1), I.Ty, Ftz);
      double B = decodeElem(Part(2), I.Ty, Ftz);
      double C = I.NumOps > 3 ? decodeElem(Part(3), I.Ty, Ftz) : 0;
      double V = exactBinary(I.Op, A, B, C);
      if (I.has(FlagRelu) && !std::isnan(V) && V < 0)
        V = 0;
      R = encodeElem(V, I.Ty, I.Rnd, I.has(FlagSat), Ftz);
    } else if (I.Op == Opcode::Ex2 || I.Op == Opcode::Tanh) {
      double A = decodeElem(Part(1), I.Ty, Ftz);
      double V = I.Op == Opcode::Ex2 ? std::exp2(A) : std::tanh(A);
      R = encodeElem(V, I.Ty, RoundingMode::NearestEven, false, Ftz);
    } else {
      Err = std::string("unsupported ") + typeName(I.Ty) + " operation";
      return false;
    }
    D |= R << (16 * E);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

bool compareFloat(CmpOp Op, double A, double B) {
  bool Unordered = std::isnan(A) || std::isnan(B);
  switch (Op) {
  case CmpOp::Eq:
    return !Unordered && A == B;
  case CmpOp::Ne:
    return !Unordered && A != B;
  case CmpOp::Lt:
    return !Unordered && A < B;
  case CmpOp::Le:
    return !Unordered && A <= B;
  case CmpOp::Gt:
    return !Unordered && A > B;
  case CmpOp::Ge:
    return !Unordered && A >= B;
  case CmpOp::Equ:
    return Unordered || A == B;
  case CmpOp::Neu:
    return Unordered || A != B;
  case CmpOp::Ltu:
    return Unordered || A < B;
  case CmpOp::Leu:
    return Unordered || A <= B;
  case CmpOp::Gtu:
    return Unordered || A > B;
  case CmpOp::Geu:
    return Unordered || A >= B;
  case CmpOp::Num:
    return !Unordered;
  case CmpOp::Nan:
    return Unordered;
  default:
    return false;
  }
}

bool compareInt(CmpOp Op, uint64_t A, uint64_t B, Type T, bool &Ok) {
  Ok = true;
  bool S = isSigned(T);
  int64_t SA = static_cast<int64_t>(A), SB = static_cast<int64_t>(B);
  switch (Op) {
  case CmpOp::Eq:
    return A == B;
  case CmpOp::Ne:
    return A != B;
  case CmpOp::Lt:
    return S ? SA < SB : A < B;
  case CmpOp::Le:
    return S ? SA <= SB : A <= B;
  case CmpOp::Gt:
    return S ? SA > SB : A > B;
  case CmpOp::Ge:
    return S ? SA >= SB : A >= B;
  case CmpOp::Lo:
    return A < B;
  case CmpOp::Ls:
    return A <= B;
  case CmpOp::Hi:
    return A > B;
  case CmpOp::Hs:
    return A >= B;
  default:
    Ok = false;
    return false;
  }
}

bool combine(BoolOp Op, bool A, bool C) {
  switch (Op) {
  case BoolOp::And:
    return A && C;
  case BoolOp::Or:
    return A || C;
  case BoolOp::Xor:
    return A != C;
  case BoolOp::None:
    return A;
  }
  return A;
}

/// Evaluates the comparison of setp/set on (A, B) of type T.
bool evalCompare(const Instruction &I, Type T, uint64_t A, uint64_t B,
                 bool &Result, std::string &Err) {
  if (isFloat(T)) {
    if (isPacked(T)) {
      Err = "setp/set on packed types is not supported";
      return false;
    }
    Result = compareFloat(I.Cmp, decodeElem(A, T, I.has(FlagFtz)),
                          decodeElem(B, T, I.has(FlagFtz)));
    return true;
  }
  bool Ok;
  Result = compareInt(I.Cmp, extendTo64(A, T), extendTo64(B, T), T, Ok);
  if (!Ok)
    Err = "unordered comparison on an integer type";
  return Ok;
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

/// Rounds a float value to an integral value per Mode.
double roundIntegral(double V, RoundingMode Mode) {
  switch (Mode) {
  case RoundingMode::NearestEven:
    return std::nearbyint(V);
  case RoundingMode::TowardZero:
    return std::trunc(V);
  case RoundingMode::Down:
    return std::floor(V);
  case RoundingMode::Up:
    return std::ceil(V);
  case RoundingMode::NearestAway:
    return std::round(V);
  }
  return V;
}

/// Converts a float value to integer type T: rounded, clamped, NaN -> 0.
uint64_t floatToInt(double V, Type T, RoundingMode Mode) {
  if (std::isnan(V))
    return 0;
  V = roundIntegral(V, Mode);
  unsigned Bits = typeBits(T);
  if (isSigned(T)) {
    double Lo = -std::ldexp(1.0, Bits - 1), Hi = std::ldexp(1.0, Bits - 1);
    if (V <= Lo)
      return static_cast<uint64_t>(INT64_MIN >> (64 - Bits)) & maskBits(Bits);
    if (V >= Hi)
      return maskBits(Bits - 1);
    return static_cast<uint64_t>(static_cast<int64_t>(V)) & maskBits(Bits);
  }
  if (V <= 0)
    return 0;
  if (V >= std::ldexp(1.0, Bits))
    return maskBits(Bits);
  return static_cast<uint64_t>(V);
}

/// Converts an integer (already extended to 64 bits) to float type T.
uint64_t intToFloat(uint64_t V, bool Signed, Type T, RoundingMode Mode) {
  if (T == Type::F64)
    return bitsF64(roundDoubleFromInt(static_cast<int64_t>(V), Signed, Mode));
  double Odd =
      Signed ? intRoundToOdd(static_cast<int64_t>(V)) : uintRoundToOdd(V);
  return encodeFloat(Odd, formatOf(T), Mode);
}

bool evalCvt(const Instruction &I, const uint64_t *S, uint64_t &D,
             std::string &Err) {
  Type Dt = I.Ty, St = I.Ty2;
  bool Ftz = I.has(FlagFtz), Sat = I.has(FlagSat);
  RoundingMode Mode = I.Rnd;
  // Packing two values: cvt.rn.f16x2.f32 d, a, b puts a in the upper half.
  if (isPacked(Dt) && I.NumOps == 3) {
    unsigned EB = elemBits(Dt);
    double Hi = decodeElem(S[1], St, Ftz), Lo = decodeElem(S[2], St, Ftz);
    if (I.has(FlagRelu)) {
      Hi = (!std::isnan(Hi) && Hi < 0) ? 0 : Hi;
      Lo = (!std::isnan(Lo) && Lo < 0) ? 0 : Lo;
    }
    D = (encodeElem(Hi, Dt, Mode, Sat, false) << EB) |
        encodeElem(Lo, Dt, Mode, Sat, false);
    return true;
  }
  // Unpacking fp8 pairs: cvt.rn.f16x2.e4m3x2 d, a.
  if (isPacked(St)) {
    if (!isPacked(Dt)) {
      Err = "unsupported packed conversion";
      return false;
    }
    unsigned SB = elemBits(St), DB = elemBits(Dt);
    double Hi = decodeElem(S[1] >> SB, St, false);
    double Lo = decodeElem(S[1] & maskBits(SB), St, false);
    if (I.has(FlagRelu)) {
      Hi = (!std::isnan(Hi) && Hi < 0) ? 0 : Hi;
      Lo = (!std::isnan(Lo) && Lo < 0) ? 0 : Lo;
    }
    D = (encodeElem(Hi, Dt, Mode, Sat, false) << DB) |
        encodeElem(Lo, Dt, Mode, Sat, false);
    return true;
  }
  if (isPacked(Dt)) {
    Err = "unsupported packed conversion";
    return false;
  }
  bool DF = isFloat(Dt), SF = isFloat(St);
  if (!DF && !SF) {
    uint64_t V = extendTo64(S[1], St);
    if (Sat) {
      unsigned Bits = typeBits(Dt);
      if (isSigned(Dt)) {
        int64_t Lo = INT64_MIN >> (64 - Bits), Hi = INT64_MAX >> (64 - Bits);
        int64_t X = static_cast<int64_t>(V);
        if (isSigned(St))
          X = std::min(Hi, std::max(Lo, X));
        else
          X = V > static_cast<uint64_t>(Hi) ? Hi : static_cast<int64_t>(V);
        V = static_cast<uint64_t>(X);
      } else {
        uint64_t Hi = maskBits(Bits);
        if (isSigned(St) && static_cast<int64_t>(V) < 0)
          V = 0;
        else
          V = std::min(V, Hi);
      }
    }
    D = extendTo64(V, Dt);
    return true;
  }
  if (SF && !DF) {
    D = extendTo64(floatToInt(decodeElem(S[1], St, Ftz), Dt, Mode), Dt);
    return true;
  }
  if (!SF && DF) {
    D = intToFloat(extendTo64(S[1], St), isSigned(St), Dt, Mode);
    if (Sat || (Ftz && Dt == Type::F32))
      D = encodeElem(decodeElem(D, Dt, false), Dt, Mode, Sat, Ftz);
    return true;
  }
  double V = decodeElem(S[1], St, Ftz);
  if (I.has(FlagIntRound))
    V = roundIntegral(V, Mode);
  if (I.has(FlagRelu) && !std::isnan(V) && V < 0)
    V = 0;
  if (std::isnan(V)) {
    D = canonicalNaN(Dt);
    return true;
  }
  D = encodeElem(V, Dt, Mode, Sat, Ftz);
  return true;
}

//===----------------------------------------------------------------------===//
// Integer and bit operations
//===----------------------------------------------------------------------===//

uint64_t permute(uint32_t A, uint32_t B, uint32_t C, uint8_t Mode) {
  uint64_t Bytes = (static_cast<uint64_t>(B) << 32) | A;
  auto Byte = [&](unsigned K) { return (Bytes >> (8 * (K & 7))) & 0xff; };
  uint32_t R = 0;
  unsigned S = C & 3;
  for (unsigned I = 0; I < 4; ++I) {
    uint64_t V;
    switch (Mode) {
    case sub::PrmtF4e:
      V = Byte(S + I);
      break;
    case sub::PrmtB4e:
      V = Byte(S - I + 8);
      break;
    case sub::PrmtRc8:
      V = Byte(S);
      break;
    case sub::PrmtEcl:
      V = Byte(std::max(I, S));
      break;
    case sub::PrmtEcr:
      V = Byte(std::min(I, S));
      break;
    case sub::PrmtRc16:
      V = Byte(2 * (S & 1) + (I & 1));
      break;
    default: {
      unsigned Sel = (C >> (4 * I)) & 0xf;
      V = Byte(Sel);
      if (Sel & 8)
        V = (V & 0x80) ? 0xff : 0;
    }
    }
    R |= static_cast<uint32_t>(V) << (8 * I);
  }
  return R;
}

uint64_t lop3(uint64_t A, uint64_t B, uint64_t C, unsigned Lut) {
  uint64_t R = 0;
  for (unsigned K = 0; K < 8; ++K) {
    if (!((Lut >> K) & 1))
      continue;
    uint64_t Term =
        ((K & 4) ? A : ~A) & ((K & 2) ? B : ~B) & ((K & 1) ? C : ~C);
    R |= Term;
  }
  return R & 0xffffffffull;
}

/// Multiplication: the low or high half, or the double-width product.
uint64_t multiply(uint64_t A, uint64_t B, Type T, uint8_t Mode) {
  unsigned Bits = typeBits(T);
  __int128 X = isSigned(T) ? static_cast<__int128>(static_cast<int64_t>(A))
                           : static_cast<__int128>(A);
  __int128 Y = isSigned(T) ? static_cast<__int128>(static_cast<int64_t>(B))
                           : static_cast<__int128>(B);
  unsigned __int128 P = static_cast<unsigned __int128>(X * Y);
  if (Bits == 64 && !isSigned(T))
    P = static_cast<unsigned __int128>(A) * B;
  switch (Mode) {
  case sub::Hi:
    return static_cast<uint64_t>(P >> Bits) & maskBits(Bits);
  case sub::Wide:
    return static_cast<uint64_t>(P) & maskBits(2 * Bits);
  default:
    return static_cast<uint64_t>(P) & maskBits(Bits);
  }
}

/// The type of the result of I (double width for .wide).
Type resultType(const Instruction &I) {
  if ((I.Op == Opcode::Mul || I.Op == Opcode::Mad) && I.Sub == sub::Wide) {
    switch (I.Ty) {
    case Type::U16:
      return Type::U32;
    case Type::S16:
      return Type::S32;
    case Type::U32:
      return Type::U64;
    case Type::S32:
      return Type::S64;
    default:
      return I.Ty;
    }
  }
  return I.Ty;
}

/// fns.b32 (PTX ISA): the position of the |Offset|-th set bit of Mask,
/// walking up from Base for a positive Offset and down for a negative one,
/// Base itself included; Offset 0 tests bit Base alone. 0xffffffff when no
/// such bit exists. PTX leaves a Base above 31 undefined; here any Base
/// outside 0..31 (read as .u32 or .s32) finds nothing.
static uint32_t findNthSet(uint32_t Mask, uint32_t Base, int32_t Offset) {
  constexpr uint32_t NotFound = 0xffffffffu;
  if (Base > 31)
    return NotFound;
  if (Offset == 0)
    return (Mask >> Base) & 1 ? Base : NotFound;
  int64_t Count = Offset > 0 ? int64_t(Offset) : -int64_t(Offset);
  int Inc = Offset > 0 ? 1 : -1;
  for (int Pos = static_cast<int>(Base); Pos >= 0 && Pos < 32; Pos += Inc)
    if (((Mask >> Pos) & 1) && --Count == 0)
      return static_cast<uint32_t>(Pos);
  return NotFound;
}

bool evalInt(const Instruction &I, const uint64_t *S, uint64_t &D,
             std::string &Err) {
  Type T = I.Ty;
  unsigned Bits = typeBits(T);
  bool Sg = isSigned(T);
  uint64_t A = extendTo64(S[1], T);
  uint64_t B = I.NumOps > 2 ? extendTo64(S[2], T) : 0;
  uint64_t C = I.NumOps > 3 ? S[3] : 0;
  int64_t SA = static_cast<int64_t>(A), SB = static_cast<int64_t>(B);
  uint64_t R;
  auto Saturate = [&](__int128 V) -> uint64_t {
    __int128 Lo = INT64_MIN >> (64 - Bits), Hi = INT64_MAX >> (64 - Bits);
    return static_cast<uint64_t>(
        static_cast<int64_t>(V < Lo ? Lo : (V > Hi ? Hi : V)));
  };
  switch (I.Op) {
  case Opcode::Add:
    R = I.has(FlagSat) ? Saturate(static_cast<__int128>(SA) + SB) : A + B;
    break;
  case Opcode::Sub:
    R = I.has(FlagSat) ? Saturate(static_cast<__int128>(SA) - SB) : A - B;
    break;
  case Opcode::Mul:
    D = extendTo64(multiply(A, B, T, I.Sub), resultType(I));
    return true;
  case Opcode::Mad: {
    Type RT = resultType(I);
    uint64_t P = multiply(A, B, T, I.Sub);
    uint64_t Cx = extendTo64(C, RT);
    if (I.has(FlagSat) && I.Sub == sub::Hi && T == Type::S32)
      R = Saturate(
          static_cast<__int128>(static_cast<int64_t>(extendTo64(P, T))) +
          static_cast<int64_t>(Cx));
    else
      R = P + Cx;
    D = extendTo64(R, RT);
    return true;
  }
  case Opcode::Mul24:
  case Opcode::Mad24: {
    int64_t X = Sg ? (static_cast<int64_t>(A << 40) >> 40) : (A & 0xffffff);
    int64_t Y = Sg ? (static_cast<int64_t>(B << 40) >> 40) : (B & 0xffffff);
    uint64_t P = static_cast<uint64_t>(X * Y);
    R = I.Sub == sub::Hi ? (P >> 16) : P;
    if (I.Op == Opcode::Mad24)
      R += C;
    break;
  }
  case Opcode::Sad:
    R = (Sg ? static_cast<uint64_t>(SA > SB ? SA - SB : SB - SA)
            : (A > B ? A - B : B - A)) +
        C;
    break;
  case Opcode::Div:
    if (B == 0)
      R = maskBits(Bits); // What the hardware returns; PTX leaves it undefined.
    else if (Sg)
      R = (SB == -1) ? static_cast<uint64_t>(-SA)
                     : static_cast<uint64_t>(SA / SB);
    else
      R = A / B;
    break;
  case Opcode::Rem:
    if (B == 0)
      R = A;
    else if (Sg)
      R = (SB == -1) ? 0 : static_cast<uint64_t>(SA % SB);
    else
      R = A % B;
    break;
  case Opcode::Abs:
    R = SA < 0 ? static_cast<uint64_t>(-SA) : A;
    break;
  case Opcode::Neg:
    R = static_cast<uint64_t>(-SA);
    break;
  case Opcode::Min:
    R = Sg ? (SA < SB ? A : B) : (A < B ? A : B);
    break;
  case Opcode::Max:
    R = Sg ? (SA > SB ? A : B) : (A > B ? A : B);
    break;
  case Opcode::Popc:
    D = __builtin_popcountll(A & maskBits(Bits));
    return true;
  case Opcode::Clz: {
    uint64_t V = A & maskBits(Bits);
    D = V ? __builtin_clzll(V) - (64 - Bits) : Bits;
    return true;
  }
  case Opcode::Bfind: {
    uint64_t V = A & maskBits(Bits);
    if (Sg && SA < 0)
      V = ~V & maskBits(Bits);
    unsigned Pos = V ? 63 - __builtin_clzll(V) : 0;
    // .shiftamt: the left shift that would normalize the value instead.
    D = !V ? 0xffffffffull : I.Sub ? Bits - 1 - Pos : Pos;
    return true;
  }
  case Opcode::Brev: {
    uint64_t V = A & maskBits(Bits), Out = 0;
    for (unsigned K = 0; K < Bits; ++K)
      Out |= ((V >> K) & 1) << (Bits - 1 - K);
    R = Out;
    break;
  }
  case Opcode::Bfe: {
    unsigned Pos = B & 0xff, Len = C & 0xff;
    uint64_t V = A & maskBits(Bits);
    uint64_t Field = (Pos >= Bits || Len == 0)
                         ? 0
                         : (V >> Pos) & maskBits(std::min(Len, Bits));
    unsigned Top = std::min(Pos + Len, Bits) - 1;
    bool SignBit =
        Sg &&
        (Len == 0 ? false
                  : (Pos >= Bits ? (V >> (Bits - 1)) & 1 : (V >> Top) & 1));
    if (Sg && Len > 0) {
      unsigned Have = Pos >= Bits ? 0 : std::min(Len, Bits - Pos);
      if (SignBit)
        Field |= ~maskBits(Have);
    }
    R = Field;
    break;
  }
  case Opcode::Bfi: {
    unsigned Pos = S[3] & 0xff, Len = S[4] & 0xff;
    uint64_t Base = S[2] & maskBits(Bits);
    if (Pos < Bits && Len > 0) {
      uint64_t M = maskBits(std::min(Len, Bits - Pos)) << Pos;
      Base = (Base & ~M) | ((S[1] << Pos) & M);
    }
    R = Base;
    break;
  }
  case Opcode::Fns:
    D = findNthSet(static_cast<uint32_t>(S[1]), static_cast<uint32_t>(S[2]),
                   static_cast<int32_t>(S[3]));
    return true;
  case Opcode::Shl:
  case Opcode::Shr: {
    uint64_t Amount = static_cast<uint32_t>(S[2]);
    uint64_t V = A & maskBits(Bits);
    if (I.Op == Opcode::Shl)
      R = Amount >= Bits ? 0 : V << Amount;
    else if (Sg)
      R = static_cast<uint64_t>(SA >> std::min<uint64_t>(Amount, 63));
    else
      R = Amount >= Bits ? 0 : V >> Amount;
    break;
  }
  case Opcode::Shf: {
    uint64_t Pair = (static_cast<uint64_t>(static_cast<uint32_t>(S[2])) << 32) |
                    static_cast<uint32_t>(S[1]);
    uint32_t N = static_cast<uint32_t>(S[3]);
    N = (I.Sub & 1) ? (N & 31) : std::min(N, 32u);
    R = (I.Sub & 2) ? (Pair >> N) : ((Pair << N) >> 32);
    R &= 0xffffffffull;
    break;
  }
  case Opcode::And:
    R = T == Type::Pred ? ((S[1] & 1) & (S[2] & 1)) : (A & B);
    break;
  case Opcode::Or:
    R = T == Type::Pred ? ((S[1] | S[2]) & 1) : (A | B);
    break;
  case Opcode::Xor:
    R = T == Type::Pred ? ((S[1] ^ S[2]) & 1) : (A ^ B);
    break;
  case Opcode::Not:
    R = T == Type::Pred ? (~S[1] & 1) : ~A;
    break;
  case Opcode::Cnot:
    R = (A & maskBits(Bits)) == 0;
    break;
  case Opcode::Lop3:
    R = lop3(S[1], S[2], S[3], static_cast<unsigned>(S[4]) & 0xff);
    break;
  case Opcode::Prmt:
    R = permute(static_cast<uint32_t>(S[1]), static_cast<uint32_t>(S[2]),
                static_cast<uint32_t>(S[3]), I.Sub);
    break;
  case Opcode::Dp2a: {
    // Two 16-bit halves of a times two bytes of b (.lo: bytes 0-1, .hi:
    // bytes 2-3), plus c.
    int64_t Acc = static_cast<int32_t>(C);
    bool SA16 = isSigned(I.Ty), SB8 = isSigned(I.Ty2);
    unsigned ByteBase = I.Sub == sub::Hi ? 2 : 0;
    for (unsigned K = 0; K < 2; ++K) {
      uint32_t X = (S[1] >> (16 * K)) & 0xffff;
      uint32_t Y = (S[2] >> (8 * (ByteBase + K))) & 0xff;
      int64_t XV = SA16 ? static_cast<int16_t>(X) : X;
      int64_t YV = SB8 ? static_cast<int8_t>(Y) : Y;
      Acc += XV * YV;
    }
    D = extendTo64(static_cast<uint64_t>(Acc),
                   SA16 || SB8 ? Type::S32 : Type::U32);
    return true;
  }
  case Opcode::Dp4a: {
    int64_t Acc = static_cast<int32_t>(C);
    bool SA8 = isSigned(I.Ty), SB8 = isSigned(I.Ty2);
    for (unsigned K = 0; K < 4; ++K) {
      uint32_t X = (S[1] >> (8 * K)) & 0xff, Y = (S[2] >> (8 * K)) & 0xff;
      int64_t XV = SA8 ? static_cast<int8_t>(X) : X;
      int64_t YV = SB8 ? static_cast<int8_t>(Y) : Y;
      Acc += XV * YV;
    }
    D = extendTo64(static_cast<uint64_t>(Acc),
                   SA8 || SB8 ? Type::S32 : Type::U32);
    return true;
  }
  default:
    Err = std::string("unsupported integer operation on .") + typeName(T);
    return false;
  }
  D = extendTo64(R, T == Type::Pred ? Type::U8 : T);
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

bool kvq::ptx::isAluOp(const Instruction &I) {
  switch (I.Op) {
  case Opcode::Mov:
  case Opcode::Ld:
  case Opcode::St:
  case Opcode::Cvta:
  case Opcode::Prefetch:
  case Opcode::Bra:
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::Trap:
  case Opcode::Bar:
  case Opcode::BarArrive:
  case Opcode::BarRed:
  case Opcode::BarWarpSync:
  case Opcode::Membar:
  case Opcode::Shfl:
  case Opcode::Vote:
  case Opcode::Redux:
  case Opcode::Activemask:
  case Opcode::Atom:
  case Opcode::Red:
  case Opcode::Nanosleep:
  case Opcode::Unsupported:
  case Opcode::Call:
    return false;
  default:
    return true;
  }
}

bool kvq::ptx::evalLane(const Instruction &I, const uint64_t *S, uint64_t &D,
                        uint64_t &D2, std::string &Err) {
  switch (I.Op) {
  case Opcode::Setp: {
    bool R;
    if (!evalCompare(I, I.Ty, S[1], S[2], R, Err))
      return false;
    bool C =
        I.Combine != BoolOp::None ? ((S[3] & 1) != I.Ops[3].Negate) : false;
    D = combine(I.Combine, R, C);
    D2 = combine(I.Combine, !R, C);
    return true;
  }
  case Opcode::Set: {
    bool R;
    if (!evalCompare(I, I.Ty2, S[1], S[2], R, Err))
      return false;
    if (I.Combine != BoolOp::None)
      R = combine(I.Combine, R, (S[3] & 1) != I.Ops[3].Negate);
    D = I.Ty == Type::F32 ? (R ? 0x3f800000u : 0)
                          : (R ? maskBits(typeBits(I.Ty)) : 0);
    return true;
  }
  case Opcode::Selp:
    D = (S[3] & 1) != I.Ops[3].Negate ? S[1] : S[2];
    return true;
  case Opcode::Slct: {
    bool NonNeg = I.Ty2 == Type::F32 ? !(asF32(S[3]) < 0)
                                     : static_cast<int32_t>(S[3]) >= 0;
    D = NonNeg ? S[1] : S[2];
    return true;
  }
  case Opcode::Cvt:
    return evalCvt(I, S, D, Err);
  case Opcode::Testp: {
    double V = decodeElem(S[1], I.Ty, false);
    int Class = std::fpclassify(I.Ty == Type::F32 ? static_cast<float>(V) : V);
    switch (I.Sub) {
    case sub::Finite:
      D = std::isfinite(V);
      break;
    case sub::Infinite:
      D = std::isinf(V);
      break;
    case sub::Number:
      D = !std::isnan(V);
      break;
    case sub::NotANumber:
      D = std::isnan(V);
      break;
    case sub::Normal:
      D = Class == FP_NORMAL;
      break;
    default:
      D = Class == FP_SUBNORMAL;
      break;
    }
    return true;
  }
  default:
    break;
  }
  if (I.Ty == Type::F32) {
    if (I.Op == Opcode::Min || I.Op == Opcode::Max) {
      D = minMaxElem(S[1], S[2], Type::F32, I.Op == Opcode::Max, I.has(FlagNaN),
                     I.has(FlagFtz));
      return true;
    }
    return evalF32(I, S, D, Err);
  }
  if (I.Ty == Type::F64) {
    if (I.Op == Opcode::Min || I.Op == Opcode::Max) {
      D = minMaxElem(S[1], S[2], Type::F64, I.Op == Opcode::Max, I.has(FlagNaN),
                     false);
      return true;
    }
    return evalF64(I, S, D, Err);
  }
  if (isHalfLike(I.Ty))
    return evalHalf(I, S, D, Err);
  return evalInt(I, S, D, Err);
}
