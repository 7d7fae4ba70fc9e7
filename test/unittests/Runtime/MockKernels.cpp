//===- MockKernels.cpp - Host kernels of the mock test artifact -----------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// A hand-written kernels.so for Inputs/mock/manifest.json: a full-precision
// f16 "scheme" (2 layers, Hq = 4, Hkv = 2, D = 8, 4-token pages, 5-token
// splits) implementing the ABI of docs/KernelABI.md on the host. It lets the
// runtime's cache logic (sink, window, flush rule, pages, tables, splits,
// combine) be tested exactly, independent of the compiler: full-precision
// pages hold the flushed tokens bit for bit, so every region is checkable.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/FloatFormats.h"
#include "kvq/ABI/KernelABI.h"
#include "kvq/ABI/ManifestBinding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

constexpr unsigned kHq = 4, kHkv = 2, kD = 8, kP = 4;
constexpr unsigned kPageBytes = 256, kSliceBytes = 64;
constexpr unsigned kKeySink = 2, kKeyCap = 4, kKeyFlush = 2;
constexpr unsigned kValueSink = 2, kValueCap = 4, kValueFlush = 4;
const float kScale = 0.35355339059327373f;

template <typename T> T arg(void **Args, int I) {
  T V;
  std::memcpy(&V, Args[I], sizeof(T));
  return V;
}

template <typename T> T *ptrArg(void **Args, int I) {
  return reinterpret_cast<T *>(arg<uintptr_t>(Args, I));
}

float f16(const uint16_t *P) { return kvq::ref::fromF16Bits(*P); }

/// flush: one block per flush unit U and kv-head; token-major f16 slices.
/// The first windowTokens tokens come from the window ring (Cap rows); a
/// non-finite token sets NonFinite.
template <unsigned U, unsigned Cap>
void flush(void **Args, uint32_t Bx, uint32_t By, uint32_t Bz) {
  using A = kvq::abi::FlushArgs;
  auto *Window = ptrArg<const uint16_t>(Args, A::Window);
  auto *Input = ptrArg<const uint16_t>(Args, A::Input);
  auto *Pages = ptrArg<uint8_t>(Args, A::Pages);
  auto *Table = ptrArg<const uint32_t>(Args, A::Table);
  auto *NonFinite = ptrArg<uint32_t>(Args, A::NonFinite);
  unsigned Head = arg<int32_t>(Args, A::WindowHead);
  unsigned Ring = arg<int32_t>(Args, A::WindowTokens);
  int32_t Dest = arg<int32_t>(Args, A::DestPos);
  for (unsigned T = Bx * U; T < (Bx + 1) * U; ++T) {
    unsigned Pos = unsigned(Dest) + T;
    uint8_t *Slice = Pages + size_t(Table[Pos / kP]) * kPageBytes +
                     By * kSliceBytes + (Pos % kP) * kD * 2;
    const uint16_t *Src = T < Ring
                              ? Window + size_t((Head + T) % Cap) * kHkv * kD
                              : Input + size_t(T - Ring) * kHkv * kD;
    std::memcpy(Slice, Src + By * kD, kD * 2);
    for (unsigned C = 0; C < kD; ++C)
      if (!std::isfinite(f16(Src + By * kD + C)))
        *NonFinite = 1;
  }
}

/// The row of token T (sequence order) of one tensor, kv-head H.
struct TensorView {
  const uint8_t *Pages;
  const uint32_t *Table;
  const uint16_t *Sink;
  const uint16_t *Window;
  unsigned SinkN, QuantN, Head, Cap;

  const uint16_t *row(unsigned T, unsigned H) const {
    if (T < SinkN)
      return Sink + (size_t(T) * kHkv + H) * kD;
    T -= SinkN;
    if (T < QuantN)
      return reinterpret_cast<const uint16_t *>(
          Pages + size_t(Table[T / kP]) * kPageBytes + H * kSliceBytes +
          (T % kP) * kD * 2);
    T -= QuantN;
    return Window + (size_t((Head + T) % Cap) * kHkv + H) * kD;
  }
};

/// Merges the splits of output row (B, Hq) (the last block of its kv-head).
void mergeSplits(void **Args, uint32_t Hq, uint32_t B) {
  using A = kvq::abi::AttendArgs;
  auto *Partial = ptrArg<const float>(Args, A::Partial);
  auto *Out = ptrArg<float>(Args, A::Out) + (size_t(B) * kHq + Hq) * kD;
  int32_t NumSplits = arg<int32_t>(Args, A::NumSplits);
  const float *P = Partial + (size_t(B) * kHq + Hq) * NumSplits * (kD + 2);
  float M = -std::numeric_limits<float>::infinity();
  for (int32_t S = 0; S < NumSplits; ++S)
    M = std::max(M, P[S * (kD + 2)]);
  float L = 0.0f, Acc[kD] = {};
  for (int32_t S = 0; S < NumSplits && M > -INFINITY; ++S) {
    const float *Q = P + S * (kD + 2);
    if (Q[1] == 0.0f)
      continue;
    float W = std::exp(Q[0] - M);
    L += W * Q[1];
    for (unsigned C = 0; C < kD; ++C)
      Acc[C] += W * Q[2 + C];
  }
  for (unsigned C = 0; C < kD; ++C)
    Out[C] = L > 0.0f ? Acc[C] / L : 0.0f;
}

/// attend: grid (numSplits, Hkv, B); partial [B][Hq][numSplits][D + 2].
void attend(void **Args, uint32_t Split, uint32_t H, uint32_t B) {
  auto *Q = ptrArg<const uint16_t>(Args, kvq::abi::AttendArgs::Q);
  auto *Partial = ptrArg<float>(Args, kvq::abi::AttendArgs::Partial);
  using A = kvq::abi::AttendArgs;
  using F = kvq::abi::SeqsFields;
  auto *Seqs = ptrArg<const uint32_t>(Args, A::Seqs) + B * F::NumFields;
  int32_t MaxPages = arg<int32_t>(Args, A::MaxPagesPerSeq);
  int32_t NumSplits = arg<int32_t>(Args, A::NumSplits);
  unsigned Slot = Seqs[F::Slot], Tokens = Seqs[F::Tokens];
  TensorView K{ptrArg<const uint8_t>(Args, A::KPages),
               ptrArg<const uint32_t>(Args, A::KTables) +
                   size_t(Slot) * MaxPages,
               ptrArg<const uint16_t>(Args, A::KSink) +
                   size_t(Slot) * kKeySink * kHkv * kD,
               ptrArg<const uint16_t>(Args, A::KWindow) +
                   size_t(Slot) * kKeyCap * kHkv * kD,
               Seqs[F::KSink],
               Seqs[F::KQuantized],
               Seqs[F::KWindowHead],
               kKeyCap};
  TensorView V{ptrArg<const uint8_t>(Args, A::VPages),
               ptrArg<const uint32_t>(Args, A::VTables) +
                   size_t(Slot) * MaxPages,
               ptrArg<const uint16_t>(Args, A::VSink) +
                   size_t(Slot) * kValueSink * kHkv * kD,
               ptrArg<const uint16_t>(Args, A::VWindow) +
                   size_t(Slot) * kValueCap * kHkv * kD,
               Seqs[F::VSink],
               Seqs[F::VQuantized],
               Seqs[F::VWindowHead],
               kValueCap};
  unsigned SplitTokens = arg<int32_t>(Args, A::SplitTokens);
  unsigned Begin = Split * SplitTokens,
           End = std::min(Tokens, Begin + SplitTokens);
  for (unsigned Hq = H * (kHq / kHkv); Hq < (H + 1) * (kHq / kHkv); ++Hq) {
    const uint16_t *Qh = Q + (size_t(B) * kHq + Hq) * kD;
    float *Out =
        Partial + ((size_t(B) * kHq + Hq) * NumSplits + Split) * (kD + 2);
    float M = -std::numeric_limits<float>::infinity(), L = 0.0f;
    float Acc[kD] = {};
    for (unsigned T = Begin; T < End; ++T) {
      const uint16_t *Kr = K.row(T, H), *Vr = V.row(T, H);
      float S = 0.0f;
      for (unsigned C = 0; C < kD; ++C)
        S += f16(Qh + C) * f16(Kr + C);
      S *= kScale;
      float NewM = std::max(M, S);
      float Old = std::exp(M - NewM), P = std::exp(S - NewM);
      L = L * Old + P;
      for (unsigned C = 0; C < kD; ++C)
        Acc[C] = Acc[C] * Old + P * f16(Vr + C);
      M = NewM;
    }
    Out[0] = M;
    Out[1] = L;
    for (unsigned C = 0; C < kD; ++C)
      Out[2 + C] = Acc[C];
  }
  // The last block of (B, H) merges its heads' splits and resets the count.
  uint32_t *Arrived = ptrArg<uint32_t>(Args, A::Arrivals) + B * kHkv + H;
  if (__atomic_fetch_add(Arrived, 1, __ATOMIC_ACQ_REL) !=
      uint32_t(NumSplits) - 1)
    return;
  __atomic_store_n(Arrived, 0, __ATOMIC_RELAXED);
  for (unsigned Hq = H * (kHq / kHkv); Hq < (H + 1) * (kHq / kHkv); ++Hq)
    mergeSplits(Args, Hq, B);
}

} // namespace

#define KVQ_MOCK_EXPORT extern "C" __attribute__((visibility("default")))

/// The hash of the manifest these kernels implement, as kvq-opt embeds it.
KVQ_MOCK_EXPORT const uint64_t mock_fp16_manifest_hash = kvq::hashManifest(
#include "MockManifest.inc"
);

KVQ_MOCK_EXPORT void kvq_mock_flush_keys_0(void **A, uint32_t X, uint32_t Y,
                                           uint32_t Z) {
  flush<kKeyFlush, kKeyCap>(A, X, Y, Z);
}
KVQ_MOCK_EXPORT void kvq_mock_flush_keys_1(void **A, uint32_t X, uint32_t Y,
                                           uint32_t Z) {
  flush<kKeyFlush, kKeyCap>(A, X, Y, Z);
}
KVQ_MOCK_EXPORT void kvq_mock_flush_values_0(void **A, uint32_t X, uint32_t Y,
                                             uint32_t Z) {
  flush<kValueFlush, kValueCap>(A, X, Y, Z);
}
KVQ_MOCK_EXPORT void kvq_mock_flush_values_1(void **A, uint32_t X, uint32_t Y,
                                             uint32_t Z) {
  flush<kValueFlush, kValueCap>(A, X, Y, Z);
}
KVQ_MOCK_EXPORT void kvq_mock_attend_0(void **A, uint32_t X, uint32_t Y,
                                       uint32_t Z) {
  attend(A, X, Y, Z);
}
KVQ_MOCK_EXPORT void kvq_mock_attend_1(void **A, uint32_t X, uint32_t Y,
                                       uint32_t Z) {
  attend(A, X, Y, Z);
}
