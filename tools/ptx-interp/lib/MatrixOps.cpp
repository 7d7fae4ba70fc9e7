//===- MatrixOps.cpp - Warp-level matrix instructions ---------------------===//
//
// mma.sync and ldmatrix on whole-warp fragments. With groupID = lane >> 2
// and threadID_in_group = lane % 4, a register holds P = 32 / bits
// consecutive K elements (2 for f16/bf16, 4 for s8/u8):
//
//   A (16xK): register r holds row groupID + 8 * (r % 2), columns
//             (r / 2) * 4P + threadID_in_group * P + {0..P-1};
//   B (Kx8):  register r holds column groupID, rows
//             r * 4P + threadID_in_group * P + {0..P-1};
//   C, D:     register i holds row groupID + 8 * (i / 2), column
//             threadID_in_group * 2 + i % 2;
//
// which is the PTX ISA's layout for m16n8k8 and m16n8k16 (f16, bf16) and
// m16n8k16 and m16n8k32 (s8, u8).
//
//===----------------------------------------------------------------------===//

#include "MatrixOps.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kvq::ptx;

namespace {

/// An exact sum of doubles: a two's complement fixed-point number whose bit
/// 0 weighs 2^-Bias. Wide enough for every term of an mma: bf16 products
/// (magnitudes in [2^-266, 2^256]) and f32 accumulators.
class ExactSum {
public:
  /// X must be finite and 0 or of magnitude in [2^-267, 2^400].
  void add(double X) {
    if (X == 0)
      return;
    int E;
    double F = std::frexp(std::fabs(X), &E);
    uint64_t M = static_cast<uint64_t>(std::ldexp(F, 53));
    unsigned P = static_cast<unsigned>(E - 53 + Bias);
    unsigned Q = P / 64, Off = P % 64;
    uint64_t Lo = M << Off, Hi = Off ? M >> (64 - Off) : 0;
    if (X > 0)
      addAt(Q, Lo, Hi);
    else
      subAt(Q, Lo, Hi);
  }

  /// The sum rounded to f32, to nearest even, overflowing to infinity.
  /// An exact zero is +0, as an IEEE sum of terms of both signs.
  float roundToF32() const {
    uint64_t V[Limbs];
    std::memcpy(V, L, sizeof(V));
    bool Neg = V[Limbs - 1] >> 63;
    if (Neg) { // Negate: invert and add one.
      uint64_t Carry = 1;
      for (uint64_t &W : V) {
        W = ~W + Carry;
        Carry = Carry && W == 0;
      }
    }
    int H = -1;
    for (int I = Limbs - 1; I >= 0 && H < 0; --I)
      if (V[I])
        H = I * 64 + 63 - __builtin_clzll(V[I]);
    if (H < 0)
      return 0.0f;
    // The result's least significant bit: 24 significant bits, but not
    // below f32's smallest subnormal 2^-149.
    int Lsb = std::max(H - 23, Bias - 149);
    auto Bit = [&V](int I) -> uint64_t {
      return I < 0 ? 0 : (V[I / 64] >> (I % 64)) & 1;
    };
    uint64_t Sig = 0;
    for (int I = H; I >= Lsb; --I)
      Sig = Sig << 1 | Bit(I);
    // Sticky: any bit below the rounding bit, that is in [0, Lsb - 1).
    bool Round = Bit(Lsb - 1), Sticky = false;
    int Below = Lsb - 1;
    for (int I = 0; I < Below / 64 && !Sticky; ++I)
      Sticky = V[I] != 0;
    if (!Sticky && Below % 64)
      Sticky = V[Below / 64] & ((1ull << (Below % 64)) - 1);
    if (Round && (Sticky || (Sig & 1)))
      ++Sig;
    double R = std::ldexp(static_cast<double>(Sig), Lsb - Bias);
    if (R >= 0x1p128)
      R = std::numeric_limits<double>::infinity();
    return static_cast<float>(Neg ? -R : R);
  }

private:
  static constexpr int Bias = 320;
  static constexpr int Limbs = 12;
  uint64_t L[Limbs] = {};

  void addAt(unsigned Q, uint64_t Lo, uint64_t Hi) {
    uint64_t Carry = 0;
    for (unsigned I = Q; I < Limbs; ++I) {
      uint64_t Add = I == Q ? Lo : I == Q + 1 ? Hi : 0;
      if (I > Q + 1 && !Carry)
        break;
      uint64_t S = L[I] + Add;
      uint64_t C1 = S < Add;
      L[I] = S + Carry;
      Carry = C1 | (L[I] < S);
    }
  }
  void subAt(unsigned Q, uint64_t Lo, uint64_t Hi) {
    uint64_t Borrow = 0;
    for (unsigned I = Q; I < Limbs; ++I) {
      uint64_t Sub = I == Q ? Lo : I == Q + 1 ? Hi : 0;
      if (I > Q + 1 && !Borrow)
        break;
      uint64_t D = L[I] - Sub;
      uint64_t B1 = L[I] < Sub;
      L[I] = D - Borrow;
      Borrow = B1 | (D < Borrow);
    }
  }
};

/// Element E (0-based, low bits first) of a fragment register.
double floatElement(uint32_t Reg, unsigned E, Type T) {
  uint16_t H = static_cast<uint16_t>(Reg >> (16 * E));
  return T == Type::BF16 ? bf16ToFloat(H) : halfToFloat(H);
}
int64_t intElement(uint32_t Reg, unsigned E, Type T) {
  uint8_t B = static_cast<uint8_t>(Reg >> (8 * E));
  return T == Type::S8 ? static_cast<int8_t>(B) : static_cast<int64_t>(B);
}

float f32Of(uint32_t B) {
  float F;
  std::memcpy(&F, &B, 4);
  return F;
}
uint32_t bitsOf(float F) {
  uint32_t B;
  std::memcpy(&B, &F, 4);
  return F != F ? 0x7fffffffu : B;
}

/// C/D element I of a lane: (row, column).
void accPosition(unsigned Lane, unsigned I, unsigned &Row, unsigned &Col) {
  Row = (Lane >> 2) + 8 * (I / 2);
  Col = (Lane % 4) * 2 + I % 2;
}

/// One f32 output: C + sum of the products, each exact in double.
float floatDot(const double *ARow, const double *BCol, unsigned K, float C) {
  bool NaN = C != C, PosInf = C == INFINITY, NegInf = C == -INFINITY;
  // Fast path: when no double addition rounds (the common case, for terms
  // of similar magnitudes), the double sum is the exact sum.
  double Fast = C;
  bool Exact = true;
  for (unsigned J = 0; J < K; ++J) {
    double P = ARow[J] * BCol[J], T = Fast + P, V = T - Fast;
    NaN |= P != P;
    PosInf |= P == INFINITY;
    NegInf |= P == -INFINITY;
    Exact &= (Fast - (T - V)) + (P - V) == 0; // TwoSum's rounding error.
    Fast = T;
  }
  if (NaN || (PosInf && NegInf))
    return std::numeric_limits<float>::quiet_NaN();
  if (PosInf || NegInf)
    return PosInf ? INFINITY : -INFINITY;
  if (Exact) // One rounding; the sign of an exact zero is IEEE's.
    return std::fabs(Fast) >= 0x1.ffffffp127 ? std::copysign(INFINITY, Fast)
                                             : static_cast<float>(Fast);
  ExactSum Sum;
  Sum.add(C);
  for (unsigned J = 0; J < K; ++J)
    Sum.add(ARow[J] * BCol[J]);
  return Sum.roundToF32();
}

} // namespace

std::string kvq::ptx::checkMmaShape(const MmaShape &S) {
  bool Half = S.A == Type::F16 || S.A == Type::BF16;
  bool Byte = (S.A == Type::S8 || S.A == Type::U8) &&
              (S.B == Type::S8 || S.B == Type::U8);
  if (S.Acc == Type::F32 && Half && S.B == S.A) {
    if (S.K != 8 && S.K != 16)
      return "mma with f16/bf16 inputs needs shape m16n8k8 or m16n8k16";
    if (S.Saturate)
      return "mma .satfinite needs integer inputs";
    return "";
  }
  if (S.Acc == Type::S32 && Byte) {
    if (S.K != 16 && S.K != 32)
      return "mma with s8/u8 inputs needs shape m16n8k16 or m16n8k32";
    return "";
  }
  return std::string("unsupported mma types .") + typeName(S.Acc) + "." +
         typeName(S.A) + "." + typeName(S.B) +
         " (supported: f32 with f16/bf16, s32 with s8/u8)";
}

void kvq::ptx::mmaWarp(const MmaShape &S, const Fragment &A, const Fragment &B,
                       const Fragment &C, Fragment &D) {
  // Unpack the fragments into the 16xK and Kx8 matrices.
  unsigned PA = 32 / typeBits(S.A), PB = 32 / typeBits(S.B);
  bool IsFloat = S.Acc == Type::F32;
  double AF[16][32], BF[8][32];
  int64_t AI[16][32], BI[8][32];
  for (unsigned Lane = 0; Lane < 32; ++Lane) {
    unsigned G = Lane >> 2, T = Lane % 4;
    for (unsigned R = 0; R < S.aRegs(); ++R)
      for (unsigned E = 0; E < PA; ++E) {
        unsigned Row = G + 8 * (R % 2), Col = (R / 2) * 4 * PA + T * PA + E;
        if (IsFloat)
          AF[Row][Col] = floatElement(A[Lane][R], E, S.A);
        else
          AI[Row][Col] = intElement(A[Lane][R], E, S.A);
      }
    for (unsigned R = 0; R < S.bRegs(); ++R)
      for (unsigned E = 0; E < PB; ++E) {
        unsigned Row = R * 4 * PB + T * PB + E;
        if (IsFloat)
          BF[G][Row] = floatElement(B[Lane][R], E, S.B);
        else
          BI[G][Row] = intElement(B[Lane][R], E, S.B);
      }
  }
  for (unsigned Lane = 0; Lane < 32; ++Lane)
    for (unsigned I = 0; I < MmaShape::AccRegs; ++I) {
      unsigned Row, Col;
      accPosition(Lane, I, Row, Col);
      if (IsFloat) {
        D[Lane][I] = bitsOf(floatDot(AF[Row], BF[Col], S.K, f32Of(C[Lane][I])));
        continue;
      }
      int64_t Acc = static_cast<int32_t>(C[Lane][I]);
      for (unsigned J = 0; J < S.K; ++J)
        Acc += AI[Row][J] * BI[Col][J];
      if (S.Saturate)
        Acc = std::min<int64_t>(std::max<int64_t>(Acc, INT32_MIN), INT32_MAX);
      D[Lane][I] = static_cast<uint32_t>(Acc);
    }
}

void kvq::ptx::ldmatrixWarp(unsigned Num, bool Trans,
                            const uint8_t *const Rows[32], Fragment &D) {
  auto Elem = [&Rows](unsigned Matrix, unsigned Row, unsigned Col) {
    uint16_t V;
    std::memcpy(&V, Rows[8 * Matrix + Row] + 2 * Col, 2);
    return static_cast<uint32_t>(V);
  };
  for (unsigned Lane = 0; Lane < 32; ++Lane) {
    unsigned R = Lane / 4, C = 2 * (Lane % 4);
    for (unsigned J = 0; J < Num; ++J)
      D[Lane][J] = Trans ? Elem(J, C, R) | Elem(J, C + 1, R) << 16
                         : Elem(J, R, C) | Elem(J, R, C + 1) << 16;
  }
}
