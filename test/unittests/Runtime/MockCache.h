//===- MockCache.h - Caches on the mock artifact and their model -*- C++
//-*-===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// The mock artifact (Inputs/mock, MockKernels.cpp) stores flushed tokens at
// full precision, so after any sequence of appends every region of every
// (sequence, layer) is known exactly. This header holds the model of the
// flush rule, the checks of a cache against it, and byte snapshots of a
// cache, shared by the runtime tests.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TEST_UNITTESTS_RUNTIME_MOCKCACHE_H
#define KVQ_TEST_UNITTESTS_RUNTIME_MOCKCACHE_H

#include "kvq/Reference/FloatFormats.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>

namespace kvq::runtime::mock {

inline const std::string kMockDir = KVQ_MOCK_ARTIFACT_DIR;
inline constexpr unsigned kHq = 4, kHkv = 2, kD = 8, kRow = kHkv * kD;
inline constexpr unsigned kPageTokens = 4;

inline std::shared_ptr<const Artifact> openMock() {
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(kMockDir);
  EXPECT_TRUE(A.ok()) << A.message();
  return A.ok() ? *A : nullptr;
}

inline std::unique_ptr<Cache> makeCache(unsigned Pages = 64, unsigned Seqs = 8,
                                        unsigned Threads = 2,
                                        unsigned MaxPagesPerSeq = 0) {
  CacheOptions O;
  O.PagesPerTensor = Pages;
  O.MaxSequences = Seqs;
  O.Threads = Threads;
  O.MaxPagesPerSequence = MaxPagesPerSeq;
  Expected<std::unique_ptr<Cache>> C = Cache::create(openMock(), O);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? std::move(*C) : nullptr;
}

/// Random f16 tokens [n][Hkv][D] as raw bits.
inline std::vector<uint16_t> randomTokens(std::mt19937 &Rng, unsigned N) {
  std::normal_distribution<float> Dist(0.0f, 1.0f);
  std::vector<uint16_t> V(size_t(N) * kRow);
  for (uint16_t &X : V)
    X = kvq::ref::toF16Bits(Dist(Rng));
  return V;
}

/// The model: every token appended to a (sequence, layer), and the region
/// counts the flush rule gives, simulated one flush at a time.
struct SideModel {
  unsigned Sink, Recent, Flush;
  std::vector<uint16_t> Tokens;
  unsigned SinkN = 0, Quant = 0, Window = 0;

  void append(const uint16_t *Rows, unsigned N) {
    Tokens.insert(Tokens.end(), Rows, Rows + size_t(N) * kRow);
    for (unsigned I = 0; I < N; ++I) {
      if (SinkN < Sink) {
        ++SinkN;
        continue;
      }
      ++Window;
    }
    while (Window >= Recent + Flush) {
      Window -= Flush;
      Quant += Flush;
    }
  }
  const uint16_t *token(unsigned T) const { return &Tokens[size_t(T) * kRow]; }
};

struct SliceModel {
  SideModel K{2, 3, 2, {}}, V{2, 1, 4, {}};
};

inline std::vector<uint8_t> bytesOf(const uint16_t *P, size_t Tokens) {
  const auto *B = reinterpret_cast<const uint8_t *>(P);
  return std::vector<uint8_t>(B, B + Tokens * kRow * 2);
}

/// Checks every region of tensor T of (Seq, Layer) against the model.
inline void checkSide(Cache &C, SequenceId Seq, unsigned Layer, Tensor T,
                      const SideModel &M) {
  SCOPED_TRACE(std::string(toString(T)) + " layer " + std::to_string(Layer));
  Expected<SliceCounts> Counts = C.counts(Seq, Layer);
  ASSERT_TRUE(Counts.ok()) << Counts.message();
  EXPECT_EQ((*Counts)[T].Sink, M.SinkN);
  EXPECT_EQ((*Counts)[T].Quantized, M.Quant);
  EXPECT_EQ((*Counts)[T].Window, M.Window);
  Expected<std::vector<uint8_t>> Sink = C.readSink(T, Seq, Layer);
  ASSERT_TRUE(Sink.ok());
  EXPECT_EQ(*Sink, bytesOf(M.token(0), M.SinkN));
  Expected<std::vector<uint8_t>> Window = C.readWindow(T, Seq, Layer);
  ASSERT_TRUE(Window.ok());
  EXPECT_EQ(*Window, bytesOf(M.token(M.SinkN + M.Quant), M.Window));
  for (unsigned I = 0; I < M.Quant; ++I)
    for (unsigned H = 0; H < kHkv; ++H) {
      Expected<std::vector<uint8_t>> Page =
          C.readSlicePage(T, Seq, Layer, H, I / kPageTokens);
      ASSERT_TRUE(Page.ok()) << Page.message();
      const uint16_t *Want = M.token(M.SinkN + I) + H * kD;
      ASSERT_EQ(
          std::memcmp(Page->data() + (I % kPageTokens) * kD * 2, Want, kD * 2),
          0)
          << "quantized token " << I << " head " << H;
    }
}

/// fp64 attention over every token of the model (all full precision).
inline std::vector<double> modelAttention(const SliceModel &M,
                                          const uint16_t *Q) {
  std::vector<double> Out(kHq * kD, 0.0);
  unsigned T = unsigned(M.K.Tokens.size() / kRow);
  for (unsigned Hq = 0; Hq < kHq; ++Hq) {
    unsigned H = Hq / (kHq / kHkv);
    std::vector<double> S(T);
    double Max = -INFINITY;
    for (unsigned I = 0; I < T; ++I) {
      double Dot = 0;
      for (unsigned C = 0; C < kD; ++C)
        Dot += double(kvq::ref::fromF16Bits(Q[Hq * kD + C])) *
               kvq::ref::fromF16Bits(M.K.token(I)[H * kD + C]);
      S[I] = Dot / std::sqrt(double(kD));
      Max = std::max(Max, S[I]);
    }
    double Z = 0;
    for (double &X : S)
      Z += (X = std::exp(X - Max));
    for (unsigned I = 0; I < T; ++I)
      for (unsigned C = 0; C < kD; ++C)
        Out[Hq * kD + C] +=
            S[I] / Z * kvq::ref::fromF16Bits(M.V.token(I)[H * kD + C]);
  }
  return Out;
}

/// Attention outputs agree within 1e-3 * max|out| + 1e-5 (fp32 kernels).
inline void checkAttention(Cache &C, unsigned Layer,
                           const std::vector<SequenceId> &Seqs,
                           const std::vector<const SliceModel *> &Models,
                           std::mt19937 &Rng) {
  std::vector<uint16_t> Q;
  std::normal_distribution<float> Dist(0.0f, 1.0f);
  for (size_t I = 0; I < Seqs.size() * kHq * kD; ++I)
    Q.push_back(kvq::ref::toF16Bits(Dist(Rng)));
  std::vector<float> Out(Q.size());
  ASSERT_TRUE(C.attend(Layer, Seqs, Q.data(), Out.data()).ok());
  for (size_t B = 0; B < Seqs.size(); ++B) {
    std::vector<double> Want = modelAttention(*Models[B], &Q[B * kHq * kD]);
    double Max = 0;
    for (double W : Want)
      Max = std::max(Max, std::fabs(W));
    for (size_t I = 0; I < Want.size(); ++I)
      ASSERT_NEAR(Out[B * kHq * kD + I], Want[I], 1e-3 * Max + 1e-5)
          << "sequence " << B << " element " << I;
  }
}

/// Everything observable about a cache, to prove errors change nothing.
struct Snapshot {
  std::vector<std::vector<uint8_t>> Bytes;
  std::vector<unsigned> Numbers;
  bool operator==(const Snapshot &O) const {
    return Bytes == O.Bytes && Numbers == O.Numbers;
  }
};

inline Snapshot snapshot(Cache &C, const std::vector<SequenceId> &Seqs) {
  Snapshot S;
  MemoryStats M = C.memoryStats();
  S.Numbers = {unsigned(M.BytesUsed), unsigned(M.CachedElements),
               C.freePages(Tensor::Keys), C.freePages(Tensor::Values),
               C.numSequences()};
  for (SequenceId Seq : Seqs)
    for (unsigned L = 0; L < 2; ++L)
      for (Tensor T : {Tensor::Keys, Tensor::Values}) {
        SliceCounts Counts = *C.counts(Seq, L);
        S.Numbers.push_back(Counts[T].Sink);
        S.Numbers.push_back(Counts[T].Quantized);
        S.Numbers.push_back(Counts[T].Window);
        S.Bytes.push_back(*C.readSink(T, Seq, L));
        S.Bytes.push_back(*C.readWindow(T, Seq, L));
        for (unsigned P = 0; P < *C.numPages(T, Seq); ++P)
          for (unsigned H = 0; H < kHkv; ++H)
            S.Bytes.push_back(*C.readSlicePage(T, Seq, L, H, P));
      }
  return S;
}

} // namespace kvq::runtime::mock

#endif // KVQ_TEST_UNITTESTS_RUNTIME_MOCKCACHE_H
