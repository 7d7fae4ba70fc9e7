//===- CorpusTest.cpp - Corpus kernels against CPU references -------------===//
//
// Runs the nvcc- and llc-generated kernels in corpus/ through the
// InterpDriver and checks their outputs against plain C++ computations.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "kvq/Support/Float.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace kvq::ptx;
using namespace kvq::ptx::test;

namespace {

class CorpusTest : public DeviceFixture {};

TEST_F(CorpusTest, WarpReduceShufflesAndBallot) {
  loadCorpus("reduce.ptx");
  const unsigned N = 128;
  std::vector<float> In(N);
  std::vector<int> IIn(N);
  std::mt19937 Rng(7);
  for (unsigned I = 0; I < N; ++I) {
    In[I] = static_cast<float>(Rng() % 1000) / 8.0f;
    IIn[I] = static_cast<int>(Rng() % 2001) - 1000;
  }
  IIn[5] = 0; // One lane votes false in the first warp.
  uint64_t DIn = upload(In), DIIn = upload(IIn), DOut = zeros(16),
           DMax = zeros(16), DScan = zeros(N * 4), DB = zeros(N * 4),
           DBallot = zeros(16);
  Args A;
  A.add(DIn).add(DIIn).add(DOut).add(DMax).add(DScan).add(DB).add(DBallot);
  Status S = Driver.launch(kernel("warp_reduce"), dim(2), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<float>(DOut, 4);
  auto Max = download<int>(DMax, 4);
  auto Scan = download<int>(DScan, N);
  auto Bcast = download<int>(DB, N);
  auto Ballot = download<uint32_t>(DBallot, 4);
  for (unsigned W = 0; W < 4; ++W) {
    // Values are multiples of 1/8 below 125: every partial sum is exact.
    float Sum = 0;
    int M = INT32_MIN, Run = 0;
    uint32_t Bits = 0;
    for (unsigned L = 0; L < 32; ++L) {
      unsigned T = W * 32 + L;
      Sum += In[T];
      M = std::max(M, IIn[T]);
      Run += IIn[T];
      EXPECT_EQ(Scan[T], Run) << "thread " << T;
      EXPECT_EQ(Bcast[T], IIn[W * 32 + 7]) << "thread " << T;
      Bits |= static_cast<uint32_t>(IIn[T] > 0) << L;
    }
    EXPECT_EQ(Out[W], Sum) << "warp " << W;
    EXPECT_EQ(Max[W], M) << "warp " << W;
    EXPECT_EQ(Ballot[W], Bits) << "warp " << W;
  }
}

TEST_F(CorpusTest, BlockReduceThroughSharedMemory) {
  loadCorpus("reduce.ptx");
  const int N = 5000;
  std::vector<float> In(N);
  for (int I = 0; I < N; ++I)
    In[I] = static_cast<float>(I % 17);
  uint64_t DIn = upload(In), DOut = zeros(3 * 4);
  Args A;
  A.add(DIn).add(DOut).add(N);
  Status S =
      Driver.launch(kernel("block_reduce"), dim(3), dim(256), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<float>(DOut, 3);
  for (int B = 0; B < 3; ++B) {
    double Expected = 0;
    for (int I = B * 256; I < N; I += 3 * 256)
      for (int T = I; T < std::min(N, I + 256); ++T)
        Expected += In[T];
    EXPECT_EQ(Out[B], Expected) << "block " << B;
  }
  EXPECT_EQ(Driver.lastCounters().Barriers, 3u * 9u);
}

TEST_F(CorpusTest, SharedMemoryTranspose) {
  loadCorpus("transpose.ptx");
  const int W = 96, H = 64;
  std::vector<float> In(W * H);
  for (int I = 0; I < W * H; ++I)
    In[I] = static_cast<float>(I);
  for (const char *Name : {"transpose_padded", "transpose_naive"}) {
    uint64_t DIn = upload(In), DOut = zeros(W * H * 4);
    Args A;
    A.add(DIn).add(DOut).add(W).add(H);
    Status S = Driver.launch(kernel(Name), dim(W / 32, H / 32), dim(32, 8), 0,
                             A.get());
    ASSERT_TRUE(S.ok()) << S.message();
    auto Out = download<float>(DOut, W * H);
    for (int Y = 0; Y < H; ++Y)
      for (int X = 0; X < W; ++X)
        ASSERT_EQ(Out[X * H + Y], In[Y * W + X])
            << Name << " " << X << "," << Y;
  }
}

/// The CPU version of divergent_loops in divergence.cu.
int divergentReference(int T, int N) {
  int Acc = 0;
  for (int I = 0; I < N; ++I) {
    if ((I + T) % 3 == 0) {
      Acc += I * 7;
      if (T & 1) {
        for (int K = 0; K < (T & 7); ++K)
          Acc ^= K << (I & 15);
      } else {
        Acc -= T;
      }
    } else if (I % 5 == 1) {
      Acc = Acc * 3 + 1;
      continue;
    }
    if (Acc > 100000)
      break;
  }
  return Acc;
}

TEST_F(CorpusTest, DivergentLoopsReconverge) {
  loadCorpus("divergence.ptx");
  const int N = 96;
  std::vector<int> Trip(N);
  for (int T = 0; T < N; ++T)
    Trip[T] = (T * 37) % 41;
  uint64_t DTrip = upload(Trip), DOut = zeros(N * 4);
  Args A;
  A.add(DTrip).add(DOut);
  Status S =
      Driver.launch(kernel("divergent_loops"), dim(1), dim(N), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<int>(DOut, N);
  for (int T = 0; T < N; ++T) {
    int Mine = divergentReference(T, Trip[T]);
    int Other = divergentReference(T ^ 1, Trip[T ^ 1]);
    EXPECT_EQ(Out[T], Mine + (Other & 0xff)) << "thread " << T;
  }
}

TEST_F(CorpusTest, GlobalAndSharedAtomics) {
  loadCorpus("atomics.ptx");
  const int N = 1000;
  std::vector<int> In(N);
  for (int I = 0; I < N; ++I)
    In[I] = (I * 7919) % 1013 - 300;
  std::vector<int> MinMax = {INT32_MAX, INT32_MIN};
  uint64_t DIn = upload(In), DHist = zeros(64), DMinMax = upload(MinMax),
           DSum = zeros(4), DCas = zeros(4),
           DExch = upload(std::vector<int>{-1});
  Args A;
  A.add(DIn).add(N).add(DHist).add(DMinMax).add(DSum).add(DCas).add(DExch);
  Status S = Driver.launch(kernel("atomics"), dim(4), dim(256), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Hist = download<int>(DHist, 16);
  std::vector<int> Expected(16, 0);
  for (int V : In)
    ++Expected[V & 15];
  EXPECT_EQ(Hist, Expected);
  auto MM = download<int>(DMinMax, 2);
  EXPECT_EQ(MM[0], *std::min_element(In.begin(), In.end()));
  EXPECT_EQ(MM[1], *std::max_element(In.begin(), In.end()));
  EXPECT_EQ(download<float>(DSum, 1)[0], 500.0f);
  EXPECT_EQ(download<uint32_t>(DCas, 1)[0], 1000u);
  int Last = download<int>(DExch, 1)[0];
  EXPECT_TRUE(Last >= 0 && Last < N) << Last;
  EXPECT_GT(Driver.lastCounters().AtomicWarpAccesses, 0u);
}

TEST_F(CorpusTest, VectorLoadsNonCoherent) {
  loadCorpus("vecload.ptx");
  ASSERT_NE(readCorpus("vecload.ptx").find("ld.global.nc.v4.f32"),
            std::string::npos);
  const int N4 = 100;
  std::vector<float> In(N4 * 4);
  for (int I = 0; I < N4 * 4; ++I)
    In[I] = 0.25f * I - 7;
  uint64_t DIn = upload(In), DOut = zeros(N4 * 16);
  Args A;
  A.add(DIn).add(DOut).add(1.5f).add(N4);
  Status S = Driver.launch(kernel("vec_scale"), dim(2), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<float>(DOut, N4 * 4);
  for (int I = 0; I < N4 * 4; ++I)
    EXPECT_EQ(Out[I], I % 4 == 3 ? In[I] + 1.5f : In[I] * 1.5f) << I;
}

/// Hand-checked conversions: input, f16 rn/rz/rm/rp, bf16 rn/rz/rm/rp, e4m3
/// (rn, satfinite).
struct ConversionRow {
  uint32_t Input;
  uint16_t F16[4];
  uint16_t BF16[4];
  uint8_t E4M3;
};
const ConversionRow ConversionTable[] = {
    {0x3f800000,
     {0x3c00, 0x3c00, 0x3c00, 0x3c00},
     {0x3f80, 0x3f80, 0x3f80, 0x3f80},
     0x38}, // 1.0
    {0x3eaaaaab,
     {0x3555, 0x3555, 0x3555, 0x3556},
     {0x3eab, 0x3eaa, 0x3eaa, 0x3eab},
     0x2b}, // 1/3
    {0xbeaaaaab,
     {0xb555, 0xb555, 0xb556, 0xb555},
     {0xbeab, 0xbeaa, 0xbeab, 0xbeaa},
     0xab}, // -1/3
    {0x3dcccccd,
     {0x2e66, 0x2e66, 0x2e66, 0x2e67},
     {0x3dcd, 0x3dcc, 0x3dcc, 0x3dcd},
     0x1d}, // 0.1
    {0x477ff000,
     {0x7c00, 0x7bff, 0x7bff, 0x7c00},
     {0x4780, 0x477f, 0x477f, 0x4780},
     0x7e}, // 65520
    {0x322bcc77,
     {0x0000, 0x0000, 0x0000, 0x0001},
     {0x322c, 0x322b, 0x322b, 0x322c},
     0x00}, // 1e-8
    {0x3f801000,
     {0x3c00, 0x3c00, 0x3c00, 0x3c01},
     {0x3f80, 0x3f80, 0x3f80, 0x3f81},
     0x38}, // 1 + 2^-11
    {0x41880000,
     {0x4c40, 0x4c40, 0x4c40, 0x4c40},
     {0x4188, 0x4188, 0x4188, 0x4188},
     0x58}, // 17 (e4m3 tie)
    {0x3b400000,
     {0x1a00, 0x1a00, 0x1a00, 0x1a00},
     {0x3b40, 0x3b40, 0x3b40, 0x3b40},
     0x02}, // 1.5*2^-9
    {0x40200000,
     {0x4100, 0x4100, 0x4100, 0x4100},
     {0x4020, 0x4020, 0x4020, 0x4020},
     0x42}, // 2.5
    {0xc3fa0000,
     {0xdfd0, 0xdfd0, 0xdfd0, 0xdfd0},
     {0xc3fa, 0xc3fa, 0xc3fa, 0xc3fa},
     0xfe}, // -500
    {0x7f800000,
     {0x7c00, 0x7c00, 0x7c00, 0x7c00},
     {0x7f80, 0x7f80, 0x7f80, 0x7f80},
     0x7e}, // +inf
    {0x7fc00000,
     {0x7fff, 0x7fff, 0x7fff, 0x7fff},
     {0x7fff, 0x7fff, 0x7fff, 0x7fff},
     0x7f}, // NaN
};

const RoundingMode Modes[] = {RoundingMode::NearestEven,
                              RoundingMode::TowardZero, RoundingMode::Down,
                              RoundingMode::Up};

/// Runs convert.ptx (sm_80: hardware cvt for f16 and bf16 rn/rz, nvcc's
/// integer emulation for bf16 rm/rp and e4m3) or convert_sm90.ptx (cvt for
/// all of them) over Inputs.
void runConvert(DeviceFixture &F, InterpDriver &Driver,
                const std::vector<float> &In, std::vector<uint16_t> &Out16,
                std::vector<uint8_t> &Out8, std::vector<float> &Back,
                kvq::runtime::KernelHandle K) {
  int N = static_cast<int>(In.size());
  (void)F;
  auto P = [&](size_t Bytes) { return *Driver.allocate(Bytes); };
  uint64_t DIn = P(N * 4), D16 = P(N * 16), D8 = P(N), DBack = P(N * 12);
  ASSERT_TRUE(Driver.copyToDevice(DIn, In.data(), N * 4).ok());
  Args A;
  A.add(DIn).add(D16).add(D8).add(DBack).add(N);
  Status S = Driver.launch(K, dim((N + 63) / 64), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  Out16.resize(N * 8);
  Out8.resize(N);
  Back.resize(N * 3);
  ASSERT_TRUE(Driver.copyToHost(Out16.data(), D16, N * 16).ok());
  ASSERT_TRUE(Driver.copyToHost(Out8.data(), D8, N).ok());
  ASSERT_TRUE(Driver.copyToHost(Back.data(), DBack, N * 12).ok());
}

class ConvertTest : public DeviceFixture,
                    public ::testing::WithParamInterface<const char *> {};

TEST_P(ConvertTest, HandCheckedTable) {
  loadCorpus(GetParam());
  std::vector<float> In;
  for (const ConversionRow &R : ConversionTable)
    In.push_back(floatOf(R.Input));
  std::vector<uint16_t> Out16;
  std::vector<uint8_t> Out8;
  std::vector<float> Back;
  runConvert(*this, Driver, In, Out16, Out8, Back, kernel("convert"));
  for (size_t I = 0; I < In.size(); ++I) {
    const ConversionRow &R = ConversionTable[I];
    for (int M = 0; M < 4; ++M) {
      EXPECT_EQ(Out16[I * 8 + M], R.F16[M])
          << std::hex << "f16 of 0x" << R.Input << " mode " << M;
      EXPECT_EQ(Out16[I * 8 + 4 + M], R.BF16[M])
          << std::hex << "bf16 of 0x" << R.Input << " mode " << M;
      // The software conversions agree with the table too.
      EXPECT_EQ(floatToHalf(In[I], Modes[M]), R.F16[M]);
      EXPECT_EQ(floatToBF16(In[I], Modes[M]), R.BF16[M]);
    }
    EXPECT_EQ(Out8[I], R.E4M3) << std::hex << "e4m3 of 0x" << R.Input;
    EXPECT_EQ(floatToE4M3(In[I]), R.E4M3);
    if (!std::isnan(In[I])) {
      EXPECT_EQ(Back[I * 3 + 0], halfToFloat(R.F16[0]));
      EXPECT_EQ(Back[I * 3 + 1], bf16ToFloat(R.BF16[0]));
      EXPECT_EQ(Back[I * 3 + 2], e4m3ToFloat(R.E4M3));
    }
  }
}

TEST_P(ConvertTest, MatchesSoftwareConversionOnRandomInputs) {
  loadCorpus(GetParam());
  std::mt19937 Rng(42);
  std::vector<float> In;
  for (int I = 0; I < 4096; ++I) {
    // Random bit patterns cover subnormals, overflow and NaNs; scaled
    // values cover the f16/e4m3 ranges densely.
    uint32_t B = Rng();
    In.push_back(I % 2 ? floatOf(B)
                       : std::ldexp(static_cast<float>(B % 100000) / 100000.f,
                                    static_cast<int>(B % 40) - 25));
  }
  std::vector<uint16_t> Out16;
  std::vector<uint8_t> Out8;
  std::vector<float> Back;
  runConvert(*this, Driver, In, Out16, Out8, Back, kernel("convert"));
  for (size_t I = 0; I < In.size(); ++I) {
    for (int M = 0; M < 4; ++M) {
      ASSERT_EQ(Out16[I * 8 + M], floatToHalf(In[I], Modes[M]))
          << std::hex << "f16 of 0x" << bitsOf(In[I]) << " mode " << M;
      ASSERT_EQ(Out16[I * 8 + 4 + M], floatToBF16(In[I], Modes[M]))
          << std::hex << "bf16 of 0x" << bitsOf(In[I]) << " mode " << M;
    }
    ASSERT_EQ(Out8[I], floatToE4M3(In[I]))
        << std::hex << "e4m3 of 0x" << bitsOf(In[I]);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ConvertTest,
                         ::testing::Values("convert.ptx", "convert_sm90.ptx"));

TEST_F(CorpusTest, LlvmSaxpy) {
  loadCorpus("llvm_kernels.ptx");
  const int N = 200;
  std::vector<float> X(N), Y(N);
  for (int I = 0; I < N; ++I) {
    X[I] = 0.1f * I;
    Y[I] = 3.0f - I;
  }
  uint64_t DX = upload(X), DY = upload(Y);
  Args A;
  A.add(1.7f).add(DX).add(DY).add(N - 3);
  Status S = Driver.launch(kernel("saxpy"), dim(4), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<float>(DY, N);
  for (int I = 0; I < N; ++I)
    EXPECT_EQ(Out[I], I < N - 3 ? std::fma(1.7f, X[I], Y[I]) : Y[I]) << I;
}

TEST_F(CorpusTest, LlvmExp2SumWithShuffleValidity) {
  loadCorpus("llvm_kernels.ptx");
  std::vector<float> In(128);
  for (int I = 0; I < 128; ++I)
    In[I] = (I % 13) * 0.375f - 2.0f;
  uint64_t DIn = upload(In), DOut = zeros(8), DOut2 = zeros(512);
  Args A;
  A.add(DIn).add(DOut).add(DOut2);
  Status S = Driver.launch(kernel("exp2_sum"), dim(2), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<float>(DOut, 2);
  auto Out2 = download<float>(DOut2, 128);
  for (int B = 0; B < 2; ++B) {
    double Expected = 0;
    for (int I = 0; I < 64; ++I)
      Expected += std::exp2(static_cast<double>(In[B * 64 + I]));
    EXPECT_NEAR(Out[B], Expected, Expected * 1e-6);
  }
  for (int T = 0; T < 128; ++T) {
    bool Valid = (T % 32) + 3 <= 31;
    EXPECT_EQ(Out2[T], Valid ? In[T + 3] : -1.0f) << T;
  }
}

TEST_F(CorpusTest, LlvmFp8RoundTripAndHalfArithmetic) {
  loadCorpus("llvm_kernels.ptx");
  const int N = 64;
  std::vector<float> In(2 * N);
  std::mt19937 Rng(3);
  for (float &V : In)
    V = std::ldexp(static_cast<float>(Rng() % 2000) / 1000.f - 1.f,
                   static_cast<int>(Rng() % 16) - 6);
  In[0] = 1000.f; // Saturates to 448.
  uint64_t DIn = upload(In), DQ = zeros(N * 2), DH = zeros(N * 4),
           DHs = zeros(N * 2);
  Args A;
  A.add(DIn).add(DQ).add(DH).add(DHs);
  Status S = Driver.launch(kernel("fp8_roundtrip"), dim(1), dim(N), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Q = download<uint16_t>(DQ, N);
  auto H = download<uint32_t>(DH, N);
  auto Hs = download<uint16_t>(DHs, N);
  for (int I = 0; I < N; ++I) {
    uint8_t Lo = floatToE4M3(In[2 * I]), Hi = floatToE4M3(In[2 * I + 1]);
    ASSERT_EQ(Q[I], (Hi << 8) | Lo) << I;
    uint16_t HLo = floatToHalf(e4m3ToFloat(Lo)),
             HHi = floatToHalf(e4m3ToFloat(Hi));
    ASSERT_EQ(H[I], (uint32_t(HHi) << 16) | HLo) << I;
    float Prod = halfToFloat(floatToHalf(halfToFloat(HLo) * halfToFloat(HHi)));
    EXPECT_EQ(Hs[I], floatToHalf(Prod + halfToFloat(HLo))) << I;
  }
  EXPECT_EQ(Q[0] & 0xff, 0x7e);
}

int collatzReference(int N) {
  int Steps = 0;
  while (N > 1 && Steps < 1000) {
    N = (N & 1) ? 3 * N + 1 : N / 2;
    ++Steps;
  }
  return Steps;
}

int tableSumReference(int N) {
  int S = 0;
  for (int I = 0; I < (N & 15); ++I)
    S += ((I * 7 + N) & 15) * N;
  return S;
}

TEST_F(CorpusTest, DeviceFunctionCalls) {
  loadCorpus("calls.ptx");
  const int N = 96;
  std::vector<int> In(N);
  for (int I = 0; I < N; ++I)
    In[I] = I * 5 + 1;
  uint64_t DIn = upload(In), DOut = zeros(N * 4), DTab = zeros(N * 4),
           DSum = zeros(N * 4);
  Args A;
  A.add(DIn).add(DOut).add(DTab).add(DSum);
  // Full warps: the callee's shuffle names all 32 lanes.
  Status S = Driver.launch(kernel("calls"), dim(3), dim(32), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<int>(DOut, N);
  auto Tab = download<int>(DTab, N);
  auto Sum = download<float>(DSum, N);
  for (int T = 0; T < N; ++T) {
    EXPECT_EQ(Out[T], T % 3 ? collatzReference(In[T]) : -1) << T;
    EXPECT_EQ(Tab[T], tableSumReference(In[T])) << T;
    float Expected = 0; // Small integers: every order of sums is exact.
    for (int L = 0; L < 32; ++L)
      Expected += static_cast<float>(In[T / 32 * 32 + L]);
    EXPECT_EQ(Sum[T], Expected) << T;
  }
}

TEST_F(CorpusTest, LlvmDeviceFunctionCall) {
  loadCorpus("llvm_kernels.ptx");
  std::vector<uint32_t> In(64);
  for (uint32_t I = 0; I < 64; ++I)
    In[I] = I * 0x01010101u;
  uint64_t DIn = upload(In), DOut = zeros(256);
  Args A;
  A.add(DIn).add(DOut);
  Status S = Driver.launch(kernel("call_mix"), dim(1), dim(64), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  auto Out = download<uint32_t>(DOut, 64);
  for (uint32_t T = 0; T < 64; ++T) {
    uint32_t Y = (T * 2654435761u) ^ In[T];
    EXPECT_EQ(Out[T], (Y << 13) | (Y >> 19)) << T;
  }
}

/// GQA decode attention at 4k context: 2 kv-heads x 4 query heads each,
/// head dimension 128.
TEST_F(CorpusTest, DecodeAttention4kContext) {
  loadCorpus("decode_attn.ptx");
  const int Ctx = 4096, KVH = 2, G = 4, H = KVH * G, D = 128;
  std::mt19937 Rng(11);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<float> Q(H * D), Kc(size_t(KVH) * Ctx * D), V(Kc.size());
  for (float &X : Q)
    X = U(Rng);
  for (float &X : Kc)
    X = U(Rng);
  for (float &X : V)
    X = U(Rng);
  float Scale = 1.0f / std::sqrt(float(D)) * 1.4426950408889634f;
  uint64_t DQ = upload(Q), DK = upload(Kc), DV = upload(V),
           DOut = zeros(H * D * 4), DScores = zeros(size_t(H) * Ctx * 4);
  Args A;
  A.add(DQ).add(DK).add(DV).add(DOut).add(DScores).add(Ctx).add(Scale);
  Status S =
      Driver.launch(kernel("decode_attn"), dim(KVH), dim(32, G), 0, A.get());
  ASSERT_TRUE(S.ok()) << S.message();
  const Counters &C = Driver.lastCounters();
  std::printf(
      "[ perf     ] decode_attn ctx=%d: %.3f s, %llu warp instructions, "
      "%.3g warp instructions/s, coalescing %.3f\n",
      Ctx, C.Seconds, (unsigned long long)C.WarpInstructions,
      C.warpInstructionsPerSecond(), C.coalescingEfficiency());
  RecordProperty("seconds", std::to_string(C.Seconds));
  RecordProperty("warp_instructions_per_second",
                 std::to_string(C.warpInstructionsPerSecond()));
  auto Out = download<float>(DOut, H * D);
  for (int Hd = 0; Hd < H; ++Hd) {
    int Kv = Hd / G;
    std::vector<double> Sc(Ctx);
    double M = -INFINITY;
    for (int J = 0; J < Ctx; ++J) {
      double Dot = 0;
      for (int E = 0; E < D; ++E)
        Dot += double(Q[Hd * D + E]) * Kc[(size_t(Kv) * Ctx + J) * D + E];
      Sc[J] = Dot * Scale;
      M = std::max(M, Sc[J]);
    }
    double Sum = 0;
    for (double &X : Sc)
      Sum += (X = std::exp2(X - M));
    for (int E = 0; E < D; ++E) {
      double Acc = 0;
      for (int J = 0; J < Ctx; ++J)
        Acc += Sc[J] * V[(size_t(Kv) * Ctx + J) * D + E];
      EXPECT_NEAR(Out[Hd * D + E], Acc / Sum, 2e-4) << Hd << "," << E;
    }
  }
  // Each warp reads every K and V row once with 16-byte lanes: fully
  // coalesced except the lane-0 score traffic.
  EXPECT_GT(C.coalescingEfficiency(), 0.9);
}

} // namespace
