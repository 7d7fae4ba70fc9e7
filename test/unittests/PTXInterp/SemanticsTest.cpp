//===- SemanticsTest.cpp - Instruction semantics, lane by lane ------------===//
//
// Each case runs one instruction sequence over 32 lanes with operands
// %r1..%r3 loaded from a buffer and checks %r4 against a C++ expectation.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "kvq/Support/Float.h"

#include <cmath>
#include <functional>
#include <random>

using namespace kvq::ptx;
using namespace kvq::ptx::test;

namespace {

std::string laneKernel(const std::string &Body) {
  return R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry lane(.param .u64 in, .param .u64 out)
{
  .reg .pred %p<8>; .reg .b16 %h<8>; .reg .b32 %r<16>; .reg .b64 %rd<8>;
  .reg .f32 %f<8>; .reg .f64 %fd<4>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r10, %tid.x;
  mul.wide.u32 %rd3, %r10, 12;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r1, [%rd4];
  ld.global.u32 %r2, [%rd4+4];
  ld.global.u32 %r3, [%rd4+8];
)" + Body +
         R"(
  mul.wide.u32 %rd5, %r10, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r4;
  ret;
}
)";
}

using Expect = std::function<uint32_t(uint32_t, uint32_t, uint32_t)>;

class SemanticsTest : public DeviceFixture {
protected:
  std::mt19937 Rng{123};

  /// Runs Body over Inputs (3 words per lane) and checks every lane.
  void check(const std::string &Body, const std::vector<uint32_t> &Inputs,
             const Expect &Fn) {
    load(laneKernel(Body));
    uint64_t In = upload(Inputs), Out = zeros(32 * 4);
    Args A;
    A.add(In).add(Out);
    Status S = Driver.launch(kernel("lane"), dim(1), dim(32), 0, A.get());
    ASSERT_TRUE(S.ok()) << S.message();
    auto R = download<uint32_t>(Out, 32);
    for (unsigned L = 0; L < 32; ++L) {
      uint32_t A0 = Inputs[3 * L], B0 = Inputs[3 * L + 1],
               C0 = Inputs[3 * L + 2];
      ASSERT_EQ(R[L], Fn(A0, B0, C0))
          << std::hex << Body << "\nlane " << L << " a=0x" << A0 << " b=0x"
          << B0 << " c=0x" << C0;
    }
  }
  std::vector<uint32_t> randomInputs() {
    std::vector<uint32_t> V(96);
    for (uint32_t &X : V)
      X = Rng();
    return V;
  }
  /// Floats including NaN, infinities, signed zeros and subnormals.
  std::vector<uint32_t> floatInputs() {
    const uint32_t Specials[] = {0x7fc00000, 0x7f800000, 0xff800000,
                                 0x00000000, 0x80000000, 0x00000001,
                                 0x3f800000, 0xbf800000, 0x00800000};
    std::vector<uint32_t> V(96);
    for (size_t I = 0; I < V.size(); ++I)
      V[I] = I % 4 == 0 ? Specials[(I / 4) % 9]
                        : bitsOf(std::ldexp(float(Rng() % 20000) / 1e4f - 1,
                                            int(Rng() % 20) - 10));
    return V;
  }
};

TEST_F(SemanticsTest, PermuteAllModes) {
  auto In = randomInputs();
  for (unsigned L = 0; L < 32; ++L)
    In[3 * L + 2] &= 0xffff;
  check("  prmt.b32 %r4, %r1, %r2, %r3;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          uint64_t X = (uint64_t(B) << 32) | A;
          uint32_t R = 0;
          for (int I = 0; I < 4; ++I) {
            unsigned Sel = (C >> (4 * I)) & 15;
            uint32_t Byte = (X >> (8 * (Sel & 7))) & 0xff;
            if (Sel & 8)
              Byte = (Byte & 0x80) ? 0xff : 0;
            R |= Byte << (8 * I);
          }
          return R;
        });
  check("  prmt.b32.f4e %r4, %r1, %r2, %r3;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          uint64_t X = (uint64_t(B) << 32) | A;
          uint32_t R = 0;
          for (unsigned I = 0; I < 4; ++I)
            R |= uint32_t((X >> (8 * (((C & 3) + I) & 7))) & 0xff) << (8 * I);
          return R;
        });
  check("  prmt.b32.ecr %r4, %r1, %r2, %r3;", In,
        [](uint32_t A, uint32_t, uint32_t C) {
          uint32_t R = 0;
          for (unsigned I = 0; I < 4; ++I)
            R |= ((A >> (8 * std::min(I, C & 3))) & 0xff) << (8 * I);
          return R;
        });
}

TEST_F(SemanticsTest, BitOperations) {
  auto In = randomInputs();
  check("  lop3.b32 %r4, %r1, %r2, %r3, 0x96;", In,
        [](uint32_t A, uint32_t B, uint32_t C) { return A ^ B ^ C; });
  check("  lop3.b32 %r4, %r1, %r2, %r3, 0xe8;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          return (A & B) | (A & C) | (B & C); // Majority.
        });
  check("  and.b32 %r5, %r3, 31;\n  shf.l.wrap.b32 %r4, %r1, %r2, %r5;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          uint64_t X = (uint64_t(B) << 32) | A;
          return uint32_t((X << (C & 31)) >> 32);
        });
  check("  and.b32 %r5, %r3, 63;\n  shf.r.clamp.b32 %r4, %r1, %r2, %r5;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          uint64_t X = (uint64_t(B) << 32) | A;
          return uint32_t(X >> std::min(C & 63, 32u));
        });
  check("  and.b32 %r5, %r2, 31;\n  and.b32 %r6, %r3, 31;\n"
        "  bfe.s32 %r4, %r1, %r5, %r6;",
        In, [](uint32_t A, uint32_t B, uint32_t C) {
          unsigned Pos = B & 31, Len = C & 31;
          if (Len == 0)
            return 0u;
          unsigned Top = std::min(Pos + Len, 32u) - 1;
          uint32_t Field = uint32_t(uint64_t(A) >> Pos);
          unsigned Have = std::min(Len, 32 - Pos);
          uint32_t Mask = Have >= 32 ? ~0u : (1u << Have) - 1;
          Field &= Mask;
          if ((A >> Top) & 1)
            Field |= ~Mask;
          return Field;
        });
  check("  and.b32 %r5, %r3, 15;\n  bfi.b32 %r4, %r1, %r2, %r5, 9;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          uint32_t Mask = 0x1ffu << (C & 15);
          return (B & ~Mask) | ((A << (C & 15)) & Mask);
        });
  check("  brev.b32 %r5, %r1;\n  popc.b32 %r6, %r2;\n  clz.b32 %r7, %r3;\n"
        "  add.s32 %r8, %r5, %r6;\n  add.s32 %r4, %r8, %r7;",
        In, [](uint32_t A, uint32_t B, uint32_t C) {
          uint32_t R = 0;
          for (int I = 0; I < 32; ++I)
            R |= ((A >> I) & 1) << (31 - I);
          return R + __builtin_popcount(B) + (C ? __builtin_clz(C) : 32);
        });
  check("  shr.u32 %r5, %r1, %r3;\n  bfind.shiftamt.s32 %r4, %r5;", In,
        [](uint32_t A, uint32_t, uint32_t C) {
          uint32_t V = C >= 32 ? 0 : A >> C;
          if (int32_t(V) < 0)
            V = ~V;
          return V ? uint32_t(__builtin_clz(V)) : 0xffffffffu;
        });
  check("  shr.u32 %r5, %r1, %r3;\n  bfind.u32 %r4, %r5;", In,
        [](uint32_t A, uint32_t, uint32_t C) {
          uint32_t V = (C & 0xffffffff) >= 32 ? 0 : A >> C;
          return V ? 31u - __builtin_clz(V) : 0xffffffffu;
        });
}

/// fns.b32 as the PTX ISA states it: walk from base by the sign of offset,
/// base included, counting set bits; offset 0 tests bit base alone.
uint32_t findNthSetReference(uint32_t Mask, int64_t Base, int32_t Offset) {
  uint32_t D = 0xffffffffu;
  if (Offset == 0) {
    if (Base >= 0 && Base < 32 && ((Mask >> Base) & 1))
      D = uint32_t(Base);
    return D;
  }
  int64_t Pos = Base, Count = std::abs(int64_t(Offset)) - 1;
  int Inc = Offset > 0 ? 1 : -1;
  while (Pos >= 0 && Pos < 32) {
    if ((Mask >> Pos) & 1) {
      if (Count == 0)
        return uint32_t(Pos);
      --Count;
    }
    Pos += Inc;
  }
  return D;
}

TEST_F(SemanticsTest, FindNthSet) {
  // The ISA's examples, lane by lane.
  std::vector<uint32_t> In(96, 0);
  const int32_t Examples[][3] = {{3, 1, 3}, {3, -1, 3}, {2, 1, 3}, {2, -1, 1}};
  for (unsigned L = 0; L < 32; ++L) {
    In[3 * L] = 0xaaaaaaaau;
    In[3 * L + 1] = uint32_t(Examples[L % 4][0]);
    In[3 * L + 2] = uint32_t(Examples[L % 4][1]);
  }
  check("  fns.b32 %r4, %r1, %r2, %r3;", In,
        [&](uint32_t, uint32_t B, uint32_t C) {
          for (const auto &E : Examples)
            if (uint32_t(E[0]) == B && uint32_t(E[1]) == C)
              return uint32_t(E[2]);
          return 0u;
        });
  // Random masks, bases in 0..31 and offsets -33..33 (including 0 and
  // counts past the last set bit), then bases outside 0..31: negative as
  // .s32, above 31 as .u32, both of which find nothing.
  for (int Round = 0; Round < 8; ++Round) {
    In = randomInputs();
    for (unsigned L = 0; L < 32; ++L) {
      if (L % 3 == 0)
        In[3 * L] &= Rng();
      In[3 * L + 1] = Round < 6
                          ? Rng() % 32
                          : (Round == 6 ? uint32_t(-int32_t(Rng() % 40) - 1)
                                        : 32 + Rng() % 1000);
      In[3 * L + 2] = L == 0 ? 0x80000000u : uint32_t(int32_t(Rng() % 67) - 33);
    }
    check("  fns.b32 %r4, %r1, %r2, %r3;", In,
          [](uint32_t A, uint32_t B, uint32_t C) {
            return findNthSetReference(
                A, int64_t(int32_t(B)) < 0 ? int64_t(int32_t(B)) : int64_t(B),
                int32_t(C));
          });
  }
  // An immediate base and offset, as `__fns` compiles them.
  In = randomInputs();
  check("  fns.b32 %r4, %r1, 31, -2;", In, [](uint32_t A, uint32_t, uint32_t) {
    return findNthSetReference(A, 31, -2);
  });
}

TEST_F(SemanticsTest, IntegerArithmetic) {
  auto In = randomInputs();
  for (unsigned L = 0; L < 32; ++L)
    if (L % 5 == 0)
      In[3 * L + 1] = L % 2 ? 0xffffffffu : 0x80000000u;
  check("  mul.hi.s32 %r4, %r1, %r2;", In,
        [](uint32_t A, uint32_t B, uint32_t) {
          return uint32_t((int64_t(int32_t(A)) * int32_t(B)) >> 32);
        });
  check("  mad.wide.u32 %rd5, %r1, %r2, %rd1;\n  sub.s64 %rd6, %rd5, %rd1;\n"
        "  shr.u64 %rd7, %rd6, 17;\n  cvt.u32.u64 %r4, %rd7;",
        In, [](uint32_t A, uint32_t B, uint32_t) {
          return uint32_t((uint64_t(A) * B) >> 17);
        });
  check("  div.s32 %r5, %r1, %r2;\n  rem.s32 %r6, %r1, %r2;\n"
        "  xor.b32 %r4, %r5, %r6;",
        In, [](uint32_t A, uint32_t B, uint32_t) {
          int32_t X = int32_t(A), Y = int32_t(B);
          if (Y == -1)
            return uint32_t(-int64_t(X));
          return uint32_t((X / Y) ^ (X % Y));
        });
  check("  add.sat.s32 %r4, %r1, %r2;", In,
        [](uint32_t A, uint32_t B, uint32_t) {
          int64_t S = int64_t(int32_t(A)) + int32_t(B);
          return uint32_t(int32_t(
              std::max<int64_t>(INT32_MIN, std::min<int64_t>(INT32_MAX, S))));
        });
  check("  mul24.lo.u32 %r4, %r1, %r2;", In,
        [](uint32_t A, uint32_t B, uint32_t) {
          return uint32_t(uint64_t(A & 0xffffff) * (B & 0xffffff));
        });
  check("  dp4a.s32.u32 %r4, %r1, %r2, %r3;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          int32_t Acc = int32_t(C);
          for (int I = 0; I < 4; ++I)
            Acc +=
                int32_t(int8_t(A >> (8 * I))) * int32_t((B >> (8 * I)) & 0xff);
          return uint32_t(Acc);
        });
  check("  dp2a.hi.s32.s32 %r4, %r1, %r2, %r3;", In,
        [](uint32_t A, uint32_t B, uint32_t C) {
          int32_t Acc = int32_t(C);
          for (int I = 0; I < 2; ++I)
            Acc += int32_t(int16_t(A >> (16 * I))) *
                   int32_t(int8_t(B >> (8 * (2 + I))));
          return uint32_t(Acc);
        });
  check("  min.s32 %r5, %r1, %r2;\n  max.u32 %r6, %r2, %r3;\n"
        "  sub.s32 %r4, %r6, %r5;",
        In, [](uint32_t A, uint32_t B, uint32_t C) {
          return std::max(B, C) - uint32_t(std::min(int32_t(A), int32_t(B)));
        });
}

TEST_F(SemanticsTest, CarryChains) {
  auto In = randomInputs();
  for (unsigned L = 0; L < 32; L += 4)
    In[3 * L] = In[3 * L + 2] = 0xffffffffu; // Force carries and borrows.
  auto Wide = [](uint32_t Hi, uint32_t Lo) {
    return (uint64_t(Hi) << 32) | Lo;
  };
  auto Fold = [](uint64_t V) { return uint32_t(V) ^ uint32_t(V >> 32); };
  check("  add.cc.u32 %r5, %r1, %r3;\n  addc.u32 %r6, %r2, %r1;\n"
        "  xor.b32 %r4, %r5, %r6;",
        In, [&](uint32_t A, uint32_t B, uint32_t C) {
          return Fold(Wide(B, A) + Wide(A, C));
        });
  check("  sub.cc.u32 %r5, %r1, %r3;\n  subc.cc.u32 %r6, %r2, %r1;\n"
        "  subc.u32 %r7, 0, 0;\n  xor.b32 %r8, %r5, %r6;\n"
        "  xor.b32 %r4, %r8, %r7;",
        In, [&](uint32_t A, uint32_t B, uint32_t C) {
          uint64_t X = Wide(B, A), Y = Wide(A, C);
          return Fold(X - Y) ^ (X < Y ? 0xffffffffu : 0u);
        });
  check("  mad.lo.cc.u32 %r5, %r1, %r2, %r3;\n"
        "  madc.hi.u32 %r6, %r1, %r2, 0;\n  xor.b32 %r4, %r5, %r6;",
        In, [&](uint32_t A, uint32_t B, uint32_t C) {
          return Fold(uint64_t(A) * B + C);
        });
}

TEST_F(SemanticsTest, FloatComparisonsAndMinMax) {
  auto In = floatInputs();
  check("  setp.ltu.f32 %p1, %r1, %r2;\n  setp.ge.and.f32 %p2, %r2, %r3, %p1;\n"
        "  selp.u32 %r5, 1, 0, %p1;\n  selp.u32 %r6, 2, 0, %p2;\n"
        "  or.b32 %r4, %r5, %r6;",
        In, [](uint32_t A, uint32_t B, uint32_t C) {
          float X = floatOf(A), Y = floatOf(B), Z = floatOf(C);
          bool P1 = std::isnan(X) || std::isnan(Y) || X < Y;
          bool P2 = (!std::isnan(Y) && !std::isnan(Z) && Y >= Z) && P1;
          return uint32_t(P1) | (uint32_t(P2) << 1);
        });
  check("  min.f32 %r4, %r1, %r2;", In, [](uint32_t A, uint32_t B, uint32_t) {
    float X = floatOf(A), Y = floatOf(B);
    if (std::isnan(X) && std::isnan(Y))
      return 0x7fffffffu;
    if (std::isnan(X))
      return B;
    if (std::isnan(Y))
      return A;
    if (X == Y)
      return std::signbit(X) ? A : B;
    return X < Y ? A : B;
  });
  check("  max.NaN.f32 %r4, %r1, %r2;", In,
        [](uint32_t A, uint32_t B, uint32_t) {
          float X = floatOf(A), Y = floatOf(B);
          if (std::isnan(X) || std::isnan(Y))
            return 0x7fffffffu;
          if (X == Y)
            return std::signbit(X) ? B : A;
          return X > Y ? A : B;
        });
  check("  testp.subnormal.f32 %p1, %r1;\n  testp.infinite.f32 %p2, %r2;\n"
        "  selp.u32 %r5, 1, 0, %p1;\n  selp.u32 %r6, 2, 0, %p2;\n"
        "  or.b32 %r4, %r5, %r6;",
        In, [](uint32_t A, uint32_t B, uint32_t) {
          return uint32_t(std::fpclassify(floatOf(A)) == FP_SUBNORMAL) |
                 (uint32_t(std::isinf(floatOf(B))) << 1);
        });
}

TEST_F(SemanticsTest, IeeeFloatArithmetic) {
  auto In = floatInputs();
  auto Canon = [](float F) { return std::isnan(F) ? 0x7fffffffu : bitsOf(F); };
  check("  div.rn.f32 %r4, %r1, %r2;", In,
        [&](uint32_t A, uint32_t B, uint32_t) {
          return Canon(floatOf(A) / floatOf(B));
        });
  check("  fma.rn.f32 %r4, %r1, %r2, %r3;", In,
        [&](uint32_t A, uint32_t B, uint32_t C) {
          return Canon(std::fma(floatOf(A), floatOf(B), floatOf(C)));
        });
  check("  sqrt.rn.f32 %r4, %r1;", In, [&](uint32_t A, uint32_t, uint32_t) {
    return Canon(std::sqrt(floatOf(A)));
  });
  // Directed rounding: exact quotient rounded toward zero, checked by
  // bracketing against double arithmetic.
  check("  div.rz.f32 %r4, %r1, %r2;", In,
        [&](uint32_t A, uint32_t B, uint32_t) {
          double Q = double(floatOf(A)) / double(floatOf(B));
          if (std::isnan(Q))
            return 0x7fffffffu;
          return uint32_t(encodeFloat(divRoundToOdd(floatOf(A), floatOf(B)),
                                      FloatFormat::F32,
                                      RoundingMode::TowardZero));
        });
  check(
      "  add.rm.f32 %r4, %r1, %r2;", In, [&](uint32_t A, uint32_t B, uint32_t) {
        double S = double(floatOf(A)) + double(floatOf(B)); // Exact for floats
        if (std::isnan(S))                                  // within 2^53.
          return 0x7fffffffu;
        return uint32_t(encodeFloat(addRoundToOdd(floatOf(A), floatOf(B)),
                                    FloatFormat::F32, RoundingMode::Down));
      });
  check("  mul.rn.ftz.f32 %r4, %r1, %r2;", In,
        [&](uint32_t A, uint32_t B, uint32_t) {
          auto Ftz = [](float F) {
            return std::fpclassify(F) == FP_SUBNORMAL ? std::copysign(0.f, F)
                                                      : F;
          };
          return Canon(Ftz(Ftz(floatOf(A)) * Ftz(floatOf(B))));
        });
}

TEST_F(SemanticsTest, ApproximateFunctionsWithinBounds) {
  auto In = floatInputs();
  load(laneKernel("  ex2.approx.f32 %r4, %r1;"));
  for (const char *Op : {"ex2", "lg2", "rcp", "rsqrt", "sqrt"}) {
    SCOPED_TRACE(Op);
    load(laneKernel(std::string("  ") + Op + ".approx.f32 %r4, %r1;"));
    uint64_t DIn = upload(In), DOut = zeros(128);
    Args A;
    A.add(DIn).add(DOut);
    ASSERT_TRUE(
        Driver.launch(kernel("lane"), dim(1), dim(32), 0, A.get()).ok());
    auto R = download<uint32_t>(DOut, 32);
    for (unsigned L = 0; L < 32; ++L) {
      double X = floatOf(In[3 * L]);
      std::string Name = Op;
      double Ref = Name == "ex2"     ? std::exp2(X)
                   : Name == "lg2"   ? std::log2(X)
                   : Name == "rcp"   ? 1 / X
                   : Name == "rsqrt" ? 1 / std::sqrt(X)
                                     : std::sqrt(X);
      float Got = floatOf(R[L]);
      if (std::isnan(Ref)) {
        EXPECT_TRUE(std::isnan(Got)) << X;
      } else if (std::isinf(float(Ref)) || Ref == 0) {
        EXPECT_EQ(Got, float(Ref)) << X;
      } else {
        // Documented bound: correctly rounded, so within half an ulp.
        EXPECT_LE(std::fabs(Got - Ref), std::fabs(Ref) * 0x1p-24) << X;
      }
    }
  }
}

TEST_F(SemanticsTest, DoublePrecisionAndSet) {
  auto In = floatInputs();
  // f32 -> f64, arithmetic in f64 with directed rounding, back to f32.
  check("  cvt.f64.f32 %fd1, %r1;\n  cvt.f64.f32 %fd2, %r2;\n"
        "  div.rp.f64 %fd3, %fd1, %fd2;\n  cvt.rz.f32.f64 %f1, %fd3;\n"
        "  mov.b32 %r4, %f1;",
        In, [](uint32_t A, uint32_t B, uint32_t) {
          double Q = roundDoubleDiv(floatOf(A), floatOf(B), RoundingMode::Up);
          if (std::isnan(Q))
            return 0x7fffffffu;
          return uint32_t(
              encodeFloat(Q, FloatFormat::F32, RoundingMode::TowardZero));
        });
  check("  set.gtu.u32.f32 %r5, %r1, %r2;\n  set.lt.f32.f32 %r6, %r2, %r3;\n"
        "  slct.u32.f32 %r7, %r5, %r6, %r3;\n  xor.b32 %r4, %r7, %r5;",
        In, [](uint32_t A, uint32_t B, uint32_t C) {
          float X = floatOf(A), Y = floatOf(B), Z = floatOf(C);
          uint32_t S1 = (std::isnan(X) || std::isnan(Y) || X > Y) ? ~0u : 0;
          uint32_t S2 = (Y < Z) ? 0x3f800000u : 0;
          uint32_t S3 = !(Z < 0) ? S1 : S2;
          return S3 ^ S1;
        });
}

TEST_F(SemanticsTest, ConversionsToIntegers) {
  auto In = floatInputs();
  for (unsigned L = 0; L < 32; ++L)
    if (L % 3 == 0)
      In[3 * L] = bitsOf(L % 2 ? 3e9f : -2.5f - L);
  check("  cvt.rni.s32.f32 %r4, %r1;", In, [](uint32_t A, uint32_t, uint32_t) {
    float X = floatOf(A);
    if (std::isnan(X))
      return 0u;
    double R = std::nearbyint(X);
    return uint32_t(
        int32_t(std::max(-2147483648.0, std::min(2147483647.0, R))));
  });
  check("  cvt.rzi.u32.f32 %r4, %r1;", In, [](uint32_t A, uint32_t, uint32_t) {
    float X = floatOf(A);
    if (std::isnan(X) || X <= 0)
      return 0u;
    return uint32_t(std::min(4294967295.0, std::trunc(double(X))));
  });
  auto Ints = randomInputs();
  check("  cvt.rn.f32.s32 %r4, %r1;", Ints, [](uint32_t A, uint32_t, uint32_t) {
    return bitsOf(float(int32_t(A)));
  });
  check("  cvt.rz.f32.u32 %r4, %r1;", Ints, [](uint32_t A, uint32_t, uint32_t) {
    return uint32_t(
        encodeFloat(double(A), FloatFormat::F32, RoundingMode::TowardZero));
  });
  check("  cvt.s8.s32 %r5, %r1;\n  cvt.sat.u8.s32 %r6, %r2;\n"
        "  shl.b32 %r7, %r6, 8;\n  and.b32 %r8, %r5, 0xffff;\n"
        "  or.b32 %r4, %r7, %r8;",
        Ints, [](uint32_t A, uint32_t B, uint32_t) {
          uint32_t S8 = uint32_t(int32_t(int8_t(A))) & 0xffff;
          int32_t V = int32_t(B);
          uint32_t U8 = V < 0 ? 0 : (V > 255 ? 255 : V);
          return (U8 << 8) | S8;
        });
}

TEST_F(SemanticsTest, HalfPrecisionArithmetic) {
  std::vector<uint32_t> In(96);
  for (uint32_t &X : In) {
    float A = std::ldexp(float(Rng() % 2000) / 1000.f - 1, int(Rng() % 10) - 5);
    float B = std::ldexp(float(Rng() % 2000) / 1000.f - 1, int(Rng() % 10) - 5);
    X = (uint32_t(floatToHalf(A)) << 16) | floatToHalf(B);
  }
  auto HalfOp = [](uint16_t A, uint16_t B, uint16_t C, int Op) -> uint16_t {
    double X = halfToFloat(A), Y = halfToFloat(B), Z = halfToFloat(C);
    double R = Op == 0 ? X + Y : Op == 1 ? X * Y : 0;
    if (Op == 2)
      return encodeFloat(fmaRoundToOddNarrow(X, Y, Z), FloatFormat::F16,
                         RoundingMode::NearestEven);
    return encodeFloat(R, FloatFormat::F16, RoundingMode::NearestEven);
  };
  check("  add.rn.f16x2 %r4, %r1, %r2;", In,
        [&](uint32_t A, uint32_t B, uint32_t) {
          return (uint32_t(HalfOp(A >> 16, B >> 16, 0, 0)) << 16) |
                 HalfOp(A & 0xffff, B & 0xffff, 0, 0);
        });
  check("  fma.rn.f16x2 %r4, %r1, %r2, %r3;", In,
        [&](uint32_t A, uint32_t B, uint32_t C) {
          return (uint32_t(HalfOp(A >> 16, B >> 16, C >> 16, 2)) << 16) |
                 HalfOp(A & 0xffff, B & 0xffff, C & 0xffff, 2);
        });
  check("  mov.b32 {%h1, %h2}, %r1;\n  mul.rn.f16 %h3, %h1, %h2;\n"
        "  cvt.f32.f16 %f1, %h3;\n  mov.b32 %r4, %f1;",
        In, [&](uint32_t A, uint32_t, uint32_t) {
          return bitsOf(halfToFloat(HalfOp(A & 0xffff, A >> 16, 0, 1)));
        });
  check("  cvt.rn.bf16x2.f32 %r4, %r1, %r2;", randomInputs(),
        [&](uint32_t A, uint32_t B, uint32_t) {
          return (uint32_t(floatToBF16(floatOf(A))) << 16) |
                 floatToBF16(floatOf(B));
        });
}

TEST_F(SemanticsTest, WarpVoteAndRedux) {
  auto In = randomInputs();
  // Each lane's "a" is its own; the expectation needs all lanes' values.
  std::vector<uint32_t> A(32);
  for (unsigned L = 0; L < 32; ++L)
    A[L] = In[3 * L];
  uint32_t Ballot = 0, Sum = 0, Max = 0;
  int32_t Min = INT32_MAX;
  for (unsigned L = 0; L < 32; ++L) {
    Ballot |= (A[L] & 1) << L;
    Sum += A[L];
    Max = std::max(Max, A[L]);
    Min = std::min(Min, int32_t(A[L]));
  }
  check("  and.b32 %r5, %r1, 1;\n  setp.ne.u32 %p1, %r5, 0;\n"
        "  vote.sync.ballot.b32 %r4, %p1, -1;",
        In, [&](uint32_t, uint32_t, uint32_t) { return Ballot; });
  check("  and.b32 %r5, %r1, 1;\n  setp.ne.u32 %p1, %r5, 0;\n"
        "  vote.sync.any.pred %p2, !%p1, -1;\n"
        "  vote.sync.all.pred %p3, %p1, -1;\n"
        "  selp.u32 %r6, 1, 0, %p2;\n  selp.u32 %r7, 2, 0, %p3;\n"
        "  or.b32 %r4, %r6, %r7;",
        In, [&](uint32_t, uint32_t, uint32_t) {
          return uint32_t(Ballot != ~0u) | (uint32_t(Ballot == ~0u) << 1);
        });
  check("  redux.sync.add.u32 %r5, %r1, -1;\n"
        "  redux.sync.max.u32 %r6, %r1, -1;\n"
        "  redux.sync.min.s32 %r7, %r1, -1;\n"
        "  xor.b32 %r8, %r5, %r6;\n  xor.b32 %r4, %r8, %r7;",
        In, [&](uint32_t, uint32_t, uint32_t) {
          return Sum ^ Max ^ uint32_t(Min);
        });
}

/// shfl.sync with a segment mask (width-8 sub-warps, c = 0x181f) and a
/// clamp, against the PTX ISA's definition of the source lane.
TEST_F(SemanticsTest, ShuffleSegmentsAndValidity) {
  struct Case {
    const char *Mode;
    unsigned B;
    uint32_t C;
  } Cases[] = {{"down", 3, 0x181f},
               {"up", 2, 0x1800},
               {"idx", 5, 0x181f},
               {"bfly", 6, 0x181f},
               {"down", 1, 0x0f}};
  auto In = randomInputs();
  for (const Case &K : Cases) {
    SCOPED_TRACE(std::string(K.Mode) + " " + std::to_string(K.B));
    load(laneKernel("  shfl.sync." + std::string(K.Mode) +
                    ".b32 %r5|%p1, %r1, " + std::to_string(K.B) + ", " +
                    std::to_string(K.C) +
                    ", -1;\n  selp.b32 %r4, %r5, 7, %p1;"));
    uint64_t DIn = upload(In), DOut = zeros(128);
    Args A;
    A.add(DIn).add(DOut);
    ASSERT_TRUE(
        Driver.launch(kernel("lane"), dim(1), dim(32), 0, A.get()).ok());
    auto R = download<uint32_t>(DOut, 32);
    std::string Mode = K.Mode;
    for (int L = 0; L < 32; ++L) {
      int Clamp = K.C & 31, Seg = (K.C >> 8) & 31;
      int MaxLane = (L & Seg) | (Clamp & ~Seg), MinLane = L & Seg;
      int J;
      bool P;
      if (Mode == "up") {
        J = L - int(K.B);
        P = J >= MaxLane;
      } else if (Mode == "down") {
        J = L + int(K.B);
        P = J <= MaxLane;
      } else if (Mode == "bfly") {
        J = L ^ int(K.B);
        P = J <= MaxLane;
      } else {
        J = MinLane | (int(K.B) & ~Seg);
        P = J <= MaxLane;
      }
      EXPECT_EQ(R[L], P ? In[3 * J] : 7u) << "lane " << L;
    }
  }
}

TEST_F(SemanticsTest, ActivemaskInDivergentCode) {
  auto In = randomInputs();
  load(laneKernel("  mov.u32 %r4, 0;\n  setp.lt.u32 %p1, %r10, 8;\n"
                  "  @!%p1 bra $L_skip;\n  activemask.b32 %r4;\n$L_skip:"));
  uint64_t DIn = upload(In), DOut = zeros(128);
  Args A;
  A.add(DIn).add(DOut);
  ASSERT_TRUE(Driver.launch(kernel("lane"), dim(1), dim(32), 0, A.get()).ok());
  auto R = download<uint32_t>(DOut, 32);
  for (unsigned L = 0; L < 32; ++L)
    EXPECT_EQ(R[L], L < 8 ? 0xffu : 0u) << L;
}

TEST_F(SemanticsTest, LocalAndGenericMemory) {
  // Stores through a generic pointer to a per-thread local array and to
  // shared memory, then reads them back with state-space loads.
  check("  .local .align 4 .b8 depot[16];\n  .shared .align 4 .b8 sh[128];\n"
        "  mov.u64 %rd5, depot;\n  cvta.local.u64 %rd6, %rd5;\n"
        "  st.u32 [%rd6+4], %r1;\n  ld.local.u32 %r5, [depot+4];\n"
        "  mov.u64 %rd7, sh;\n  cvta.shared.u64 %rd7, %rd7;\n"
        "  mul.wide.u32 %rd5, %r10, 4;\n  add.s64 %rd7, %rd7, %rd5;\n"
        "  atom.add.u32 %r6, [%rd7], %r2;\n  ld.volatile.u32 %r7, [%rd7+-0];\n"
        "  bar.sync 0;\n  add.s32 %r8, %r5, %r7;\n  add.s32 %r4, %r8, %r6;",
        randomInputs(), [](uint32_t A, uint32_t B, uint32_t) { return A + B; });
}

TEST_F(SemanticsTest, VectorStoresOfImmediates) {
  // LLVM stores constant vectors with immediate elements, f32 bit patterns
  // among them: {a, 0f3F800000, 7, 0f80000000} read back as words.
  check("  .shared .align 16 .b8 sh[512];\n"
        "  mov.u64 %rd5, sh;\n  mul.wide.u32 %rd6, %r10, 16;\n"
        "  add.s64 %rd7, %rd5, %rd6;\n"
        "  st.shared.v4.b32 [%rd7], {%r1, 0f3F800000, 7, 0f80000000};\n"
        "  ld.shared.v4.b32 {%r5, %r6, %r7, %r8}, [%rd7];\n"
        "  add.s32 %r9, %r5, %r6;\n  add.s32 %r9, %r9, %r7;\n"
        "  xor.b32 %r4, %r9, %r8;",
        randomInputs(), [](uint32_t A, uint32_t, uint32_t) {
          return (A + 0x3f800000u + 7u) ^ 0x80000000u;
        });
}

TEST_F(SemanticsTest, BarrierReductionCountsPredicates) {
  auto In = randomInputs();
  uint32_t Count = 0;
  for (unsigned L = 0; L < 32; ++L)
    Count += In[3 * L] & 1;
  check("  and.b32 %r5, %r1, 1;\n  setp.ne.u32 %p1, %r5, 0;\n"
        "  bar.red.popc.u32 %r4, 0, %p1;",
        In, [&](uint32_t, uint32_t, uint32_t) { return Count; });
}

} // namespace

namespace {

const char *const ModuleData = R"(.version 7.0
.target sm_80
.address_size 64
.global .align 4 .u32 counter[2] = {5, 100};
.const .align 8 .u64 table[2] = {7, 0x100000000};
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r7, [n];
  mov.u32 %r1, %tid.x;
  mov.u64 %rd2, counter;
  atom.global.add.u32 %r2, [%rd2+4], 1;
  ld.const.u64 %rd3, [table+8];
  cvt.u32.u64 %r3, %rd3;
  shl.b32 %r4, %r1, 2;
  mov.u32 %r5, dyn;
  add.s32 %r5, %r5, %r4;
  st.shared.u32 [%r5], %r1;
  bar.sync 0;
  setp.lt.u32 %p1, %r1, %r7;
  @%p1 ld.shared.u32 %r6, [%r5+4];
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s32 %r6, %r6, %r3;
  st.global.u32 [%rd5], %r6;
  st.global.u32 [%rd5+128], %r2;
  ret;
}
)";

class ModuleDataTest : public DeviceFixture {};

TEST_F(ModuleDataTest, GlobalConstAndDynamicShared) {
  load(ModuleData);
  const Module *M = Driver.module(Mod);
  ASSERT_NE(M, nullptr);
  EXPECT_EQ(M->GlobalBytes, 8u);
  uint64_t Out = zeros(64 * 4);
  // Reads of the next thread's word stay inside 32 * 4 + 4 bytes.
  Args A;
  A.add(Out).add(31u);
  Status S = Driver.launch(kernel("k"), dim(1), dim(32), 132, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto R = download<uint32_t>(Out, 64);
  // The upper half of table[1] is dropped by cvt.u32.u64: it adds 0.
  for (uint32_t L = 0; L < 31; ++L)
    EXPECT_EQ(R[L], L + 1) << L;
  // Atomics on counter[1] (initialized to 100) apply in lane order.
  for (uint32_t L = 0; L < 32; ++L)
    EXPECT_EQ(R[32 + L], 100 + L) << L;
  // A second launch sees the first one's updates of the .global variable.
  ASSERT_TRUE(Driver.launch(kernel("k"), dim(1), dim(32), 132, A.get()).ok());
  R = download<uint32_t>(Out, 64);
  for (uint32_t L = 0; L < 32; ++L)
    EXPECT_EQ(R[32 + L], 132 + L) << L;
  // With too little dynamic shared memory the store overruns it.
  S = Driver.launch(kernel("k"), dim(1), dim(32), 64, A.get());
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("tid=(16,0,0)"), std::string::npos) << S.message();
  EXPECT_NE(S.message().find("out-of-bounds shared store"), std::string::npos)
      << S.message();
}

} // namespace

namespace {

/// Warp 0 spins on a shared flag that warp 1 sets after a long loop, with
/// no barrier: warps take turns, so the launch terminates.
const char *const SpinWait = R"(.version 7.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 out)
{
  .reg .pred %p<3>; .reg .b32 %r<4>; .reg .b64 %rd<3>;
  .shared .align 4 .u32 flag;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 32;
  @%p1 bra $L_wait;
  mov.u32 %r2, 0;
$L_count:
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p2, %r2, 10000;
  @%p2 bra $L_count;
  st.volatile.shared.u32 [flag], %r2;
  ret;
$L_wait:
  ld.volatile.shared.u32 %r3, [flag];
  setp.eq.u32 %p2, %r3, 0;
  @%p2 bra $L_wait;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd2, %rd1, %rd2;
  st.global.u32 [%rd2], %r3;
  ret;
}
)";

class SchedulingTest : public DeviceFixture {};

TEST_F(SchedulingTest, WarpsTakeTurns) {
  load(SpinWait);
  // Without turns, warp 0 would spin until this limit.
  Driver.setInstructionLimit(1000000);
  uint64_t Out = zeros(32 * 4);
  Args A;
  A.add(Out);
  Status S = Driver.launch(kernel("spin"), dim(1), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  for (uint32_t V : download<uint32_t>(Out, 32))
    EXPECT_EQ(V, 10000u);
}

} // namespace
