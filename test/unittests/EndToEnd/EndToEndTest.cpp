//===- EndToEndTest.cpp - Compiled kernels vs the numerics reference ------===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// Specs in test/unittests/Runtime/Specs are compiled at build time
// (kvq_add_spec); each test drives a libkvq_runtime Cache on the artifact and
// a kvq::ref::Slice per (sequence, layer, kv-head) with the same tokens, then
// compares:
//  - region counts, sink and window rows: exact;
//  - every quantized code, scale and zero-point: bit-exact, decoded from the
//    page bytes with the manifest's layout (docs/KernelABI.md) and looked up
//    in the reference by its group numbering;
//  - key norms: bit-exact;
//  - decode attention: max |out - ref| <= 2e-3 * max |ref| + 1e-4 per
//    sequence, against the reference's fp64 attention (pre-RoPE keys: the
//    reference rotates every key in fp64; queries rotated or not).
// Appending n tokens at once must leave the same bytes as n single appends.
// The CPU backend runs everything; the PTX interpreter (DeviceBackend over
// InterpDriver) runs a smaller case of every spec.
//
//===----------------------------------------------------------------------===//

#include "RealActivations.h"
#include "SlicePages.h"
#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Reference/Reference.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

using namespace kvq;
using namespace kvq::runtime;

namespace {

//===----------------------------------------------------------------------===//
// The specs under test
//===----------------------------------------------------------------------===//

enum class SchemeKind {
  Kivi2,
  InnerQBase,
  InnerQHybrid,
  Skvq,
  Ott,
  PreRopeKivi2,
  PreRopeSkvq,
  PreRopeReorder,
  RotatedKivi2,
  RotatedK4V4,
  RotatedK3V3,
  RotatedK8V8
};

struct SpecParam {
  const char *Name;
  const char *Dir;
  SchemeKind Kind;
  unsigned Heads, KvHeads, HeadDim;
};

const SpecParam kSpecs[] = {
    {"kivi2_d64_gqa1", KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1, SchemeKind::Kivi2,
     2, 2, 64},
    {"kivi2_d128_gqa4", KVQ_ARTIFACT_DIR_E2E_KIVI2_D128_GQA4, SchemeKind::Kivi2,
     8, 2, 128},
    {"kivi2_d128_gqa4_block256", KVQ_ARTIFACT_DIR_E2E_KIVI2_D128_GQA4_BLOCK256,
     SchemeKind::Kivi2, 8, 2, 128},
    {"kivi2_d64_gqa1_x86_64_v2", KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1_GENERIC,
     SchemeKind::Kivi2, 2, 2, 64},
    {"kivi2_d64_gqa12", KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA12, SchemeKind::Kivi2,
     24, 2, 64},
    {"innerq_base_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA4,
     SchemeKind::InnerQBase, 8, 2, 64},
    {"innerq_base_d64_gqa4_x86_64_v3",
     KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA4_AVX2, SchemeKind::InnerQBase, 8,
     2, 64},
    {"innerq_base_d128_gqa1", KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D128_GQA1,
     SchemeKind::InnerQBase, 2, 2, 128},
    {"innerq_base_d64_gqa16", KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA16,
     SchemeKind::InnerQBase, 16, 1, 64},
    {"innerq_hybrid_d64_gqa1", KVQ_ARTIFACT_DIR_E2E_INNERQ_HYBRID_D64_GQA1,
     SchemeKind::InnerQHybrid, 2, 2, 64},
    {"innerq_hybrid_d128_gqa4", KVQ_ARTIFACT_DIR_E2E_INNERQ_HYBRID_D128_GQA4,
     SchemeKind::InnerQHybrid, 8, 2, 128},
    {"skvq_d128_gqa4", KVQ_ARTIFACT_DIR_E2E_SKVQ_D128_GQA4, SchemeKind::Skvq, 8,
     2, 128},
    {"ott_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_OTT_D64_GQA4, SchemeKind::Ott, 8, 2,
     64},
    {"prerope_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_PREROPE_D64_GQA4,
     SchemeKind::PreRopeKivi2, 8, 2, 64},
    {"prerope_d128_gqa4", KVQ_ARTIFACT_DIR_E2E_PREROPE_D128_GQA4,
     SchemeKind::PreRopeSkvq, 8, 2, 128},
    {"prerope_reorder_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_PREROPE_REORDER_D64_GQA4,
     SchemeKind::PreRopeReorder, 8, 2, 64},
    {"rot_kivi2_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_ROT_KIVI2_D64_GQA4,
     SchemeKind::RotatedKivi2, 8, 2, 64},
    {"rot_k4v4_d128_gqa4_x86_64_v2",
     KVQ_ARTIFACT_DIR_E2E_ROT_K4V4_D128_GQA4_GENERIC, SchemeKind::RotatedK4V4,
     8, 2, 128},
    {"rot_k3v3_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_ROT_K3V3_D64_GQA4,
     SchemeKind::RotatedK3V3, 8, 2, 64},
    {"rot_k8v8_d64_gqa4_x86_64_v2",
     KVQ_ARTIFACT_DIR_E2E_ROT_K8V8_D64_GQA4_GENERIC, SchemeKind::RotatedK8V8, 8,
     2, 64},
};

/// OTT (ott-d64-gqa4.mlir): pools of 3 + 4 entries from layer 1.
constexpr unsigned kOttFirstLayer = 1;
constexpr int kOttCapacity = 3, kOttExtra = 4;

/// gtest prints the spec's name for GetParam().
void PrintTo(const SpecParam &P, std::ostream *OS) { *OS << P.Name; }

constexpr unsigned kLayers = 2;
constexpr unsigned kPageTokens = 128;
/// The compiler's split size (manifest split_tokens, checked).
constexpr unsigned kSplitTokens = 512;

ref::QuantScheme quant(int Bits, ref::Mode Mode, ref::Span Span, int Group = 32,
                       ref::ParamType Params = ref::ParamType::F16,
                       float Clip = 1.0f) {
  ref::QuantScheme S;
  S.bits = Bits;
  S.mode = Mode;
  S.span = Span;
  S.groupSize = Group;
  S.params = Params;
  S.clip = Clip;
  return S;
}

/// The reference configuration of each spec, written from the spec text
/// (not from the manifest, which the tests check against it).
/// `rotate = hadamard`, with `rotate_seed = Seed` where given.
ref::RotationConfig hadamard(std::optional<uint32_t> Seed = std::nullopt) {
  ref::RotationConfig R;
  R.enabled = true;
  R.seeded = Seed.has_value();
  R.seed = Seed.value_or(0);
  return R;
}

ref::SliceConfig referenceConfig(const SpecParam &P) {
  ref::SliceConfig C;
  C.headDim = int(P.HeadDim);
  if (P.Kind == SchemeKind::RotatedKivi2) {
    C.key = {quant(2, ref::Mode::Asym, ref::Span::Tokens), 4, 1, 128};
    C.key.rotation = hadamard(7);
    C.value = {quant(2, ref::Mode::Asym, ref::Span::Channels), 4, 129, 1};
    C.value.rotation = hadamard();
    return C;
  }
  if (P.Kind == SchemeKind::RotatedK4V4) {
    C.key = {quant(4, ref::Mode::Asym, ref::Span::Channels), 4, 32, 32};
    C.key.rotation = hadamard();
    C.value = {quant(4, ref::Mode::Asym, ref::Span::Tokens), 4, 32, 32};
    C.value.rotation = hadamard(1234567);
    return C;
  }
  if (P.Kind == SchemeKind::RotatedK3V3) {
    C.key = {quant(3, ref::Mode::Sym, ref::Span::Channels), 4, 32, 32};
    C.key.rotation = hadamard(99);
    C.value = {quant(3, ref::Mode::Asym, ref::Span::Tokens), 4, 32, 32};
    C.value.rotation = hadamard();
    return C;
  }
  if (P.Kind == SchemeKind::RotatedK8V8) {
    C.key = {quant(8, ref::Mode::Asym, ref::Span::Tokens), 0, 32, 32};
    C.key.rotation = hadamard(3);
    C.value = {quant(8, ref::Mode::Asym, ref::Span::Channels, 64), 0, 32, 32};
    C.value.rotation = hadamard(5);
    return C;
  }
  if (P.Kind == SchemeKind::Kivi2 || P.Kind == SchemeKind::PreRopeKivi2) {
    int Sink = P.Kind == SchemeKind::PreRopeKivi2 ? 4 : 0;
    C.key = {quant(2, ref::Mode::Asym, ref::Span::Tokens), Sink, 1, 128};
    C.value = {quant(2, ref::Mode::Asym, ref::Span::Channels), Sink, 129, 1};
    if (P.Kind == SchemeKind::PreRopeKivi2) // SmolLM2-135M's RoPE
      C.rope = {64, 100000.0, ref::RopeStyle::Interleaved};
    return C;
  }
  if (P.Kind == SchemeKind::PreRopeReorder) {
    C.key = {quant(2, ref::Mode::Asym, ref::Span::Channels, 16), 4, 16, 1};
    for (int I = 0; I < 64; ++I)
      C.key.perm.push_back((5 * I + 3) % 64);
    C.key.groupSizes = {8, 24, 16, 16};
    C.value = {quant(2, ref::Mode::Asym, ref::Span::Channels), 4, 16, 1};
    C.rope = {64, 100000.0, ref::RopeStyle::Interleaved};
    return C;
  }
  if (P.Kind == SchemeKind::Ott) {
    C.key = {quant(2, ref::Mode::Asym, ref::Span::Tokens), 4, 16, 32};
    C.value = {quant(2, ref::Mode::Asym, ref::Span::Channels), 4, 16, 32};
    C.pool = {kOttCapacity, kOttExtra, ref::ParamType::F16};
    return C;
  }
  if (P.Kind == SchemeKind::Skvq || P.Kind == SchemeKind::PreRopeSkvq) {
    ref::QuantScheme S = quant(2, ref::Mode::Asym, ref::Span::Channels, 128,
                               ref::ParamType::F8E4M3, 0.92f);
    C.key = {S, 5, 128, 1};
    C.value = {S, 5, 128, 1};
    if (P.Kind == SchemeKind::PreRopeSkvq) {
      // Llama 3 scaling (low 1, high 4 by default) over a 256-token context.
      C.rope = {64, 500000.0, ref::RopeStyle::Half, ref::RopeScaling::Llama3};
      C.rope.factor = 8.0;
      C.rope.originalMaxPosition = 256.0;
    }
    return C;
  }
  C.keyNorm = true;
  C.key = {quant(3, ref::Mode::Sym, ref::Span::Channels), 32, 96, 1};
  C.value = {P.Kind == SchemeKind::InnerQBase
                 ? quant(3, ref::Mode::Sym, ref::Span::Tokens)
                 : quant(2, ref::Mode::Hybrid, ref::Span::Tokens),
             32, 96, 32};
  return C;
}

const char *modeName(ref::Mode M) {
  return M == ref::Mode::Asym ? "asym" : M == ref::Mode::Sym ? "sym" : "hybrid";
}

/// The manifest describes the spec's schemes.
void checkManifest(const Manifest &M, const SpecParam &P,
                   const ref::SliceConfig &C) {
  EXPECT_EQ(M.Model.Layers, kLayers);
  EXPECT_EQ(M.Model.Heads, P.Heads);
  EXPECT_EQ(M.Model.KvHeads, P.KvHeads);
  EXPECT_EQ(M.Model.HeadDim, P.HeadDim);
  EXPECT_EQ(M.Model.Type, DType::F16);
  EXPECT_NEAR(M.Model.Scale, 1.0 / std::sqrt(double(P.HeadDim)), 1e-12);
  EXPECT_EQ(M.PageTokens, kPageTokens);
  EXPECT_EQ(M.SplitTokens, kSplitTokens);
  // Planned splits start on a matrix tile and on every token group.
  EXPECT_EQ(M.SplitTokens % M.SplitGranule, 0u);
  EXPECT_EQ(M.SplitGranule % 16, 0u);
  for (const TensorLayout *T : {&M.Keys, &M.Values})
    for (const LayerLayout &L : T->Layers)
      if (L.Scheme.Quantized && L.Scheme.SpanTokens) {
        EXPECT_EQ(M.SplitGranule % L.Scheme.Group, 0u) << L.Scheme.Group;
      }
  EXPECT_EQ(M.Pool.Capacity, unsigned(C.pool.capacity));
  EXPECT_EQ(M.Pool.Extra, unsigned(C.pool.extra));
  if (C.pool.capacity) {
    EXPECT_EQ(M.Pool.FirstLayer, kOttFirstLayer);
  }
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    const ref::SideConfig &Side = T == Tensor::Keys ? C.key : C.value;
    const TensorLayout &TL = M.tensor(T);
    EXPECT_EQ(TL.Sink, unsigned(Side.sink)) << toString(T);
    EXPECT_EQ(TL.Recent, unsigned(Side.window)) << toString(T);
    EXPECT_EQ(TL.Flush, unsigned(Side.flushUnit)) << toString(T);
    for (const LayerLayout &L : TL.Layers) {
      const SchemeLayout &S = L.Scheme;
      EXPECT_TRUE(S.Quantized);
      EXPECT_EQ(S.Bits, unsigned(Side.scheme.bits));
      EXPECT_EQ(S.Mode, modeName(Side.scheme.mode));
      EXPECT_EQ(S.SpanTokens, Side.scheme.span == ref::Span::Tokens);
      EXPECT_EQ(S.Group, unsigned(Side.scheme.groupSize));
      EXPECT_EQ(S.Params, Side.scheme.params == ref::ParamType::F8E4M3
                              ? std::string("f8E4M3FN")
                              : std::string(ref::toString(Side.scheme.params)));
      EXPECT_EQ(L.Slice.ParamBytes,
                unsigned(ref::bitWidth(Side.scheme.params) / 8));
      EXPECT_EQ(S.KeyNorm, T == Tensor::Keys && C.keyNorm);
      EXPECT_EQ(S.PreRope, T == Tensor::Keys && C.rope.enabled());
      // Reordered groups vary in size: their words are per token.
      bool Reordered = !Side.perm.empty();
      EXPECT_EQ(S.Perm.empty(), !Reordered);
      EXPECT_EQ(L.Slice.WordsPerGroup,
                Reordered ? 0u : (S.Group * S.Bits + 31) / 32);
    }
  }
}

//===----------------------------------------------------------------------===//
// Mismatch reporting
//===----------------------------------------------------------------------===//

/// Collects disagreements; reports the first few and a count per field.
class Mismatches {
public:
  void add(const std::string &Field, const std::string &Where) {
    if (Count[Field]++ < 3)
      First << "  " << Field << " differs at " << Where << "\n";
  }
  void expectNone(const std::string &Context) {
    if (Count.empty())
      return;
    std::ostringstream OS;
    for (const auto &[Field, N] : Count)
      OS << "  " << N << " x " << Field << "\n";
    ADD_FAILURE() << Context << ": kernels disagree with the reference\n"
                  << First.str() << OS.str();
  }

private:
  std::map<std::string, unsigned> Count;
  std::ostringstream First;
};

//===----------------------------------------------------------------------===//
// The harness: one cache and the reference slices of its sequences
//===----------------------------------------------------------------------===//

class Harness {
public:
  Harness(const SpecParam &P, std::unique_ptr<Cache> C, uint32_t Seed)
      : P(P), C(std::move(C)), Config(referenceConfig(P)), Rng(Seed) {}

  const SpecParam &P;
  std::unique_ptr<Cache> C;
  ref::SliceConfig Config;
  std::mt19937 Rng;

  struct Sequence {
    SequenceId Id;
    /// [layer * Hkv + kv-head]
    std::vector<ref::Slice> Slices;
  };
  std::vector<Sequence> Seqs;

  size_t rowElems() const { return size_t(P.KvHeads) * P.HeadDim; }

  /// OTT tracks only layers from kOttFirstLayer on.
  bool tracked(unsigned Layer) const {
    return Config.pool.capacity && Layer >= kOttFirstLayer;
  }
  ref::SliceConfig layerConfig(unsigned Layer) const {
    ref::SliceConfig C = Config;
    if (!tracked(Layer))
      C.pool = {};
    return C;
  }

  unsigned addSequence() {
    Expected<SequenceId> Id = C->addSequence();
    EXPECT_TRUE(Id.ok()) << Id.message();
    Sequence S{Id.ok() ? *Id : 0, {}};
    for (unsigned I = 0; I < kLayers * P.KvHeads; ++I)
      S.Slices.emplace_back(layerConfig(I / P.KvHeads));
    Seqs.push_back(std::move(S));
    return unsigned(Seqs.size() - 1);
  }

  /// Random tokens [n][Hkv][D] as f16-representable floats. Keys have a few
  /// large channels (what key norms are for) and one all-zero channel
  /// (constant groups); values are plain normal.
  std::vector<float> tokens(unsigned N, bool Keys) {
    std::normal_distribution<float> Dist(0.0f, 1.0f);
    std::vector<float> V(N * rowElems());
    for (size_t I = 0; I < V.size(); ++I) {
      unsigned Channel = unsigned(I % P.HeadDim);
      float X = Dist(Rng);
      if (Keys && Channel % 16 == 3)
        X *= 12.0f;
      if (Keys && Channel == 5)
        X = 0.0f;
      V[I] = ref::fromF16Bits(ref::toF16Bits(X));
    }
    return V;
  }

  static std::vector<uint16_t> toBits(const std::vector<float> &V) {
    std::vector<uint16_t> B(V.size());
    for (size_t I = 0; I < V.size(); ++I)
      B[I] = ref::toF16Bits(V[I]);
    return B;
  }

  /// Appends N[i] tokens to sequence Index[i] on Layer, in one call, and
  /// the same rows to the reference slices.
  void append(unsigned Layer, const std::vector<unsigned> &Index,
              const std::vector<unsigned> &N) {
    std::vector<std::vector<float>> Data;
    for (size_t I = 0; I < Index.size(); ++I) {
      Data.push_back(tokens(N[I], true));
      Data.push_back(tokens(N[I], false));
    }
    appendData(Layer, Index, N, Data);
  }

  /// As append, with the data given: Data[2i], Data[2i + 1] are the keys
  /// and values of sequence Index[i].
  void appendData(unsigned Layer, const std::vector<unsigned> &Index,
                  const std::vector<unsigned> &N,
                  const std::vector<std::vector<float>> &Data) {
    std::vector<std::vector<uint16_t>> Bits;
    std::vector<AppendItem> Batch;
    for (size_t I = 0; I < Index.size(); ++I) {
      const std::vector<float> &K = Data[2 * I], &V = Data[2 * I + 1];
      feedReference(Seqs[Index[I]], Layer, K, V, N[I]);
      Bits.push_back(toBits(K));
      Bits.push_back(toBits(V));
      Batch.push_back({Seqs[Index[I]].Id, N[I], Bits[Bits.size() - 2].data(),
                       Bits.back().data()});
    }
    Status S = C->append(Layer, Batch);
    ASSERT_TRUE(S.ok()) << S.message();
  }

  void feedReference(Sequence &S, unsigned Layer, const std::vector<float> &K,
                     const std::vector<float> &V, unsigned N) {
    for (unsigned H = 0; H < P.KvHeads; ++H) {
      std::vector<float> Kh(size_t(N) * P.HeadDim), Vh(Kh.size());
      for (unsigned T = 0; T < N; ++T)
        for (unsigned Ch = 0; Ch < P.HeadDim; ++Ch) {
          Kh[T * P.HeadDim + Ch] = K[(T * P.KvHeads + H) * P.HeadDim + Ch];
          Vh[T * P.HeadDim + Ch] = V[(T * P.KvHeads + H) * P.HeadDim + Ch];
        }
      S.Slices[Layer * P.KvHeads + H].append(Kh.data(), Vh.data(), int(N));
    }
  }

  /// Checks every region of every slice of sequence Index.
  void checkState(unsigned Index, const std::string &Context) {
    Mismatches M;
    Sequence &S = Seqs[Index];
    for (unsigned L = 0; L < kLayers; ++L) {
      for (Tensor T : {Tensor::Keys, Tensor::Values})
        checkTensor(S, L, T, M);
      if (Config.keyNorm)
        checkNorms(S, L, M);
      if (tracked(L))
        checkPools(S, L, M);
    }
    M.expectNone(std::string(P.Name) + ", " + Context + ", sequence of " +
                 std::to_string(S.Slices[0].numTokens()) + " tokens");
  }

  void checkTensor(Sequence &S, unsigned L, Tensor T, Mismatches &M) {
    const ref::CacheSide &Side0 = side(S, L, 0, T);
    Expected<SliceCounts> Counts = C->counts(S.Id, L);
    ASSERT_TRUE(Counts.ok());
    std::string Where =
        std::string(toString(T)) + " layer " + std::to_string(L);
    if ((*Counts)[T].Sink != unsigned(Side0.numSink()) ||
        (*Counts)[T].Quantized != unsigned(Side0.numQuantized()) ||
        (*Counts)[T].Window != unsigned(Side0.numWindow())) {
      ADD_FAILURE() << P.Name << " " << Where << ": counts "
                    << (*Counts)[T].Sink << "/" << (*Counts)[T].Quantized << "/"
                    << (*Counts)[T].Window << ", reference " << Side0.numSink()
                    << "/" << Side0.numQuantized() << "/" << Side0.numWindow();
      return;
    }
    checkRows(*C->readSink(T, S.Id, L), S, L, T, true, Where, M);
    checkRows(*C->readWindow(T, S.Id, L), S, L, T, false, Where, M);
    for (unsigned H = 0; H < P.KvHeads; ++H)
      checkQuantized(S, L, H, T, Where + " kv-head " + std::to_string(H), M);
  }

  const ref::CacheSide &side(Sequence &S, unsigned L, unsigned H, Tensor T) {
    const ref::Slice &Slice = S.Slices[L * P.KvHeads + H];
    return T == Tensor::Keys ? Slice.keys() : Slice.values();
  }

  void checkRows(const std::vector<uint8_t> &Bytes, Sequence &S, unsigned L,
                 Tensor T, bool Sink, const std::string &Where, Mismatches &M) {
    for (unsigned H = 0; H < P.KvHeads; ++H) {
      const ref::CacheSide &Side = side(S, L, H, T);
      const std::vector<float> &Rows =
          Sink ? Side.sinkRows() : Side.windowRows();
      for (size_t I = 0; I < Rows.size(); ++I) {
        size_t Token = I / P.HeadDim, Ch = I % P.HeadDim;
        uint16_t Got;
        std::memcpy(&Got,
                    &Bytes[((Token * P.KvHeads + H) * P.HeadDim + Ch) * 2], 2);
        if (Got != ref::toF16Bits(Rows[I]))
          M.add(Sink ? "sink row" : "window row",
                Where + " token " + std::to_string(Token));
      }
    }
  }

  void checkQuantized(Sequence &S, unsigned L, unsigned H, Tensor T,
                      const std::string &Where, Mismatches &M) {
    const ref::CacheSide &Side = side(S, L, H, T);
    const LayerLayout &Layout = C->manifest().tensor(T).Layers[L];
    unsigned D = P.HeadDim;
    std::vector<uint8_t> Page;
    for (int I = 0; I < Side.numQuantized(); ++I) {
      unsigned PageIndex = unsigned(I) / kPageTokens,
               Pi = unsigned(I) % kPageTokens;
      if (Pi == 0 || Page.empty()) {
        Expected<std::vector<uint8_t>> Bytes =
            C->readSlicePage(T, S.Id, L, H, PageIndex);
        ASSERT_TRUE(Bytes.ok()) << Bytes.message();
        Page = std::move(*Bytes);
      }
      for (unsigned Ch = 0; Ch < D; ++Ch) {
        test::SlotMismatch Slot =
            test::compareSlot(Page.data(), Layout, Side, D, H, I, Pi, Ch);
        std::string At = Where + " token " + std::to_string(I) + " channel " +
                         std::to_string(Ch);
        if (Slot.Code)
          M.add("code", At);
        if (Slot.Scale)
          M.add("scale", At);
        if (Slot.Zero)
          M.add("zero", At);
      }
    }
  }

  void checkNorms(Sequence &S, unsigned L, Mismatches &M) {
    Expected<std::vector<float>> Norms = C->readKeyNorms(S.Id, L);
    ASSERT_TRUE(Norms.ok());
    for (unsigned H = 0; H < P.KvHeads; ++H) {
      const std::vector<float> &Want = S.Slices[L * P.KvHeads + H].keyNorms();
      if (Want.empty())
        continue;
      ASSERT_EQ(Norms->size(), size_t(P.KvHeads) * P.HeadDim);
      for (unsigned Ch = 0; Ch < P.HeadDim; ++Ch)
        if (ref::toF32Bits((*Norms)[H * P.HeadDim + Ch]) !=
            ref::toF32Bits(Want[Ch]))
          M.add("key norm", "layer " + std::to_string(L) + " kv-head " +
                                std::to_string(H) + " channel " +
                                std::to_string(Ch));
    }
  }

  /// OTT: every kv-head's pool index (counts, stopped flag, positions) and
  /// entries (key and value rows) bit for bit.
  void checkPools(Sequence &S, unsigned L, Mismatches &M) {
    Expected<std::vector<uint32_t>> Index = C->readPoolIndex(S.Id, L);
    Expected<std::vector<uint8_t>> Rows[2] = {
        C->readPoolEntries(Tensor::Keys, S.Id, L),
        C->readPoolEntries(Tensor::Values, S.Id, L)};
    ASSERT_TRUE(Index.ok() && Rows[0].ok() && Rows[1].ok());
    unsigned Words = C->manifest().Pool.IndexWords;
    for (unsigned H = 0; H < P.KvHeads; ++H) {
      const ref::OutlierPool &Pool = S.Slices[L * P.KvHeads + H].pools();
      std::string Where =
          "layer " + std::to_string(L) + " kv-head " + std::to_string(H);
      const uint32_t *Got = Index->data() + size_t(H) * Words;
      if (Got[0] != Pool.pool().size() || Got[1] != Pool.extra().size() ||
          Got[2] != unsigned(Pool.stopped()) || Got[3] != 0) {
        M.add("pool counts", Where);
        continue;
      }
      std::vector<const ref::PoolEntry *> Entries = Pool.entries();
      for (size_t E = 0; E < Entries.size(); ++E) {
        if (Got[4 + E] != unsigned(Entries[E]->position))
          M.add("pool position", Where + " entry " + std::to_string(E));
        for (int X = 0; X < 2; ++X) {
          const std::vector<float> &Row =
              X == 0 ? Entries[E]->key : Entries[E]->value;
          for (unsigned Ch = 0; Ch < P.HeadDim; ++Ch) {
            uint16_t Bits;
            std::memcpy(&Bits,
                        &(*Rows[X])[((E * P.KvHeads + H) * P.HeadDim + Ch) * 2],
                        2);
            if (Bits != ref::toF16Bits(Row[Ch]))
              M.add(X == 0 ? "pool key" : "pool value",
                    Where + " entry " + std::to_string(E));
          }
        }
      }
    }
  }

  /// Attends Layer for the sequences Index with queries `Queries`
  /// ([Index.size()][Hq][D]; random when empty) and checks the outputs
  /// against the reference.
  void checkAttention(unsigned Layer, const std::vector<unsigned> &Index,
                      const std::string &Context,
                      std::vector<float> Queries = {},
                      QueryRope Rope = QueryRope::Rotated,
                      unsigned SplitTokens = 0) {
    size_t QRow = size_t(P.Heads) * P.HeadDim;
    std::vector<float> Q =
        Queries.empty()
            ? tokens(unsigned(Index.size() * P.Heads / P.KvHeads), false)
            : std::move(Queries);
    Q.resize(Index.size() * QRow);
    std::vector<uint16_t> QBits = toBits(Q);
    std::vector<SequenceId> Ids;
    for (unsigned I : Index)
      Ids.push_back(Seqs[I].Id);
    std::vector<float> Out(Q.size(), NAN);
    Status St = Status::success();
    if (SplitTokens) {
      // Through a plan pinning the split size.
      Expected<AttendPlan> Plan = C->planAttend(Ids, 0, SplitTokens);
      ASSERT_TRUE(Plan.ok()) << Plan.message();
      St = C->attend(Layer, *Plan, QBits.data(), Out.data(), Rope);
    } else {
      St = C->attend(Layer, Ids, QBits.data(), Out.data(), Rope);
    }
    ASSERT_TRUE(St.ok()) << St.message();
    std::vector<QueryRow> Rows;
    for (unsigned I : Index)
      Rows.push_back({I, -1});
    expectRowsMatch(Layer, Rows, Q, Out, Rope, Context);
  }

  /// Attends Layer with Counts[i] queries of sequence Index[i] in one call,
  /// each over its causal prefix (Cache::attend with query counts), and
  /// checks every row against the reference.
  void checkCausalAttention(unsigned Layer, const std::vector<unsigned> &Index,
                            const std::vector<unsigned> &Counts,
                            const std::string &Context,
                            QueryRope Rope = QueryRope::Rotated) {
    std::vector<QueryRow> Rows;
    std::vector<SequenceId> Ids;
    for (size_t I = 0; I < Index.size(); ++I) {
      int Tokens = Seqs[Index[I]].Slices[Layer * P.KvHeads].numTokens();
      for (unsigned J = 0; J < Counts[I]; ++J)
        Rows.push_back({Index[I], Tokens - int(Counts[I]) + 1 + int(J)});
      Ids.push_back(Seqs[Index[I]].Id);
    }
    std::vector<float> Q =
        tokens(unsigned(Rows.size() * P.Heads / P.KvHeads), false);
    std::vector<uint16_t> QBits = toBits(Q);
    std::vector<float> Out(Q.size(), NAN);
    Status St = C->attend(Layer, Ids, Counts, QBits.data(), Out.data(), Rope);
    ASSERT_TRUE(St.ok()) << St.message();
    expectRowsMatch(Layer, Rows, Q, Out, Rope, Context);
  }

  /// A query's reference: sequence Seq of Seqs over its first Visible tokens
  /// (-1: all of them).
  struct QueryRow {
    unsigned Seq;
    int Visible;
  };

  /// Out ([Rows.size()][Hq][D]), the outputs of queries Q, within the
  /// conformance tolerance of the reference's attention.
  void expectRowsMatch(unsigned Layer, const std::vector<QueryRow> &Rows,
                       const std::vector<float> &Q,
                       const std::vector<float> &Out, QueryRope Rope,
                       const std::string &Context) {
    size_t QRow = size_t(P.Heads) * P.HeadDim;
    unsigned R = P.Heads / P.KvHeads;
    double Scale = 1.0 / std::sqrt(double(P.HeadDim));
    for (size_t B = 0; B < Rows.size(); ++B) {
      const Sequence &S = Seqs[Rows[B].Seq];
      std::vector<double> Want(QRow);
      for (unsigned H = 0; H < P.KvHeads; ++H)
        S.Slices[Layer * P.KvHeads + H].attend(
            &Q[B * QRow + H * R * P.HeadDim], int(R), Scale,
            &Want[H * R * P.HeadDim], Rope == QueryRope::Unrotated,
            Rows[B].Visible);
      double MaxRef = 0, MaxErr = 0;
      size_t Worst = 0;
      for (size_t I = 0; I < QRow; ++I) {
        MaxRef = std::max(MaxRef, std::fabs(Want[I]));
        double Err = std::fabs(double(Out[B * QRow + I]) - Want[I]);
        if (!(Err <= MaxErr)) { // NaN counts as the worst
          MaxErr = std::isnan(Err) ? INFINITY : Err;
          Worst = I;
        }
      }
      EXPECT_LE(MaxErr, 2e-3 * MaxRef + 1e-4)
          << P.Name << ", " << Context << ", layer " << Layer
          << ": attention of the sequence of " << S.Slices[0].numTokens()
          << " tokens over " << Rows[B].Visible << ", worst at head "
          << Worst / P.HeadDim << " channel " << Worst % P.HeadDim << ": "
          << Out[B * QRow + Worst] << " vs " << Want[Worst];
    }
  }
};

std::unique_ptr<Cache> cpuCache(const SpecParam &P, unsigned Seqs,
                                unsigned Pages) {
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(P.Dir);
  EXPECT_TRUE(A.ok()) << A.message();
  if (!A.ok())
    return nullptr;
  CacheOptions O;
  O.MaxSequences = Seqs;
  O.PagesPerTensor = Pages;
  O.Threads = 2;
  Expected<std::unique_ptr<Cache>> C = Cache::create(*A, O);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? std::move(*C) : nullptr;
}

/// A cache of spec P whose backend runs the PTX for Target (empty: as
/// choosePtxTarget picks) on Driver.
std::unique_ptr<Cache> deviceCache(const SpecParam &P, unsigned Seqs,
                                   unsigned Pages,
                                   std::unique_ptr<DeviceDriver> Driver,
                                   const std::string &Target,
                                   std::string &Error) {
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(P.Dir);
  if (!A.ok()) {
    Error = A.message();
    return nullptr;
  }
  Expected<std::unique_ptr<Backend>> B =
      createDeviceBackend(**A, std::move(Driver), Target);
  if (!B.ok()) {
    Error = B.message();
    return nullptr;
  }
  CacheOptions O;
  O.MaxSequences = Seqs;
  O.PagesPerTensor = Pages;
  Expected<std::unique_ptr<Cache>> C = Cache::create(*A, O, std::move(*B));
  if (!C.ok()) {
    Error = C.message();
    return nullptr;
  }
  return std::move(*C);
}

std::unique_ptr<Cache> interpreterCache(const SpecParam &P, unsigned Seqs,
                                        unsigned Pages, std::string &Error) {
  return deviceCache(P, Seqs, Pages, std::make_unique<ptx::InterpDriver>(),
                     "sm_80", Error);
}

/// Four sequences of `Prompts` tokens prefilled in every layer, then two
/// decode steps: codes and parameters bit for bit, attention within the
/// tolerance, after the prefill and after the steps. The first three
/// sequences attend as one batch, the last alone (several splits when it is
/// longer than the planner's); after the steps all four attend in splits of
/// the granule, the shortest a plan may pin.
void checkPrefillAndDecode(Harness &H, const std::vector<unsigned> &Prompts,
                           const std::string &Backend) {
  std::vector<unsigned> All;
  for (size_t I = 0; I < Prompts.size(); ++I)
    All.push_back(H.addSequence());
  for (unsigned L = 0; L < kLayers; ++L)
    H.append(L, All, Prompts);
  const std::vector<unsigned> Short = {All[0], All[1], All[2]};
  for (unsigned L = 0; L < kLayers; ++L) {
    H.checkAttention(L, Short, Backend + ", after prefill");
    H.checkAttention(L, {All[3]}, Backend + ", after prefill");
  }
  for (unsigned Step = 0; Step < 2; ++Step)
    for (unsigned L = 0; L < kLayers; ++L)
      H.append(L, All, {1, 1, 1, 1});
  for (unsigned S : All)
    H.checkState(S, Backend);
  unsigned Granule = H.C->manifest().SplitGranule;
  for (unsigned L = 0; L < kLayers; ++L) {
    H.checkAttention(L, Short, Backend + ", after decode");
    H.checkAttention(L, {All[3]}, Backend + ", after decode");
    H.checkAttention(L, All, Backend + ", splits of the granule", {},
                     QueryRope::Rotated, Granule);
  }
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

class EndToEndTest : public ::testing::TestWithParam<SpecParam> {};

TEST_P(EndToEndTest, ManifestDescribesTheSpec) {
  const SpecParam &P = GetParam();
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(P.Dir);
  ASSERT_TRUE(A.ok()) << A.message();
  checkManifest((*A)->manifest(), P, referenceConfig(P));
}

/// Prefill 8 sequences whose lengths cross group, flush-unit, window and
/// page boundaries in one batched append per layer, then decode 40 steps.
TEST_P(EndToEndTest, PrefillAndDecodeMatchTheReference) {
  const SpecParam &P = GetParam();
  const std::vector<unsigned> Prompts = {1, 31, 127, 129, 200, 257, 383, 700};
  Harness H(P, cpuCache(P, 8, 64), 100);
  ASSERT_TRUE(H.C);
  std::vector<unsigned> All;
  for (size_t I = 0; I < Prompts.size(); ++I)
    All.push_back(H.addSequence());
  for (unsigned L = 0; L < kLayers; ++L)
    H.append(L, All, Prompts);
  for (unsigned S : All)
    H.checkState(S, "after prefill");
  // Each sequence alone, then batches of the sequences that need the same
  // number of splits (MixedSplitCounts covers batches where they differ).
  auto Attend = [&](const std::string &Context) {
    for (unsigned L = 0; L < kLayers; ++L) {
      std::map<unsigned, std::vector<unsigned>> BySplits;
      unsigned Granule = H.C->manifest().SplitGranule;
      for (unsigned S : All) {
        H.checkAttention(L, {S}, Context + ", alone");
        // The shortest splits a plan may pin: many splits to combine.
        H.checkAttention(L, {S}, Context + ", alone, splits of the granule", {},
                         QueryRope::Rotated, Granule);
        unsigned Tokens = unsigned(H.Seqs[S].Slices[0].numTokens());
        BySplits[(Tokens + kSplitTokens - 1) / kSplitTokens].push_back(S);
      }
      for (const auto &[Splits, Batch] : BySplits)
        H.checkAttention(L, Batch,
                         Context + ", batch of " + std::to_string(Splits) +
                             "-split sequences");
    }
  };
  Attend("after prefill");
  const std::vector<unsigned> Ones(All.size(), 1);
  for (unsigned Step = 1; Step <= 40; ++Step) {
    for (unsigned L = 0; L < kLayers; ++L)
      H.append(L, All, Ones);
    if (Step % 8 == 0 || Step <= 2)
      Attend("decode step " + std::to_string(Step));
    if (::testing::Test::HasFailure())
      break;
  }
  for (unsigned S : All)
    H.checkState(S, "after 40 decode steps");
}

/// Appending n tokens at once leaves the same bytes as n single appends
/// (after a common prompt, which fixes key norms).
TEST_P(EndToEndTest, BulkAppendEqualsSingleAppends) {
  const SpecParam &P = GetParam();
  Harness Bulk(P, cpuCache(P, 1, 8), 7), Single(P, cpuCache(P, 1, 8), 7);
  ASSERT_TRUE(Bulk.C && Single.C);
  unsigned A = Bulk.addSequence(), B = Single.addSequence();
  const unsigned Prompt = 40, More = 300;
  size_t Row = size_t(P.KvHeads) * P.HeadDim;
  for (unsigned L = 0; L < kLayers; ++L) {
    std::vector<std::vector<float>> First = {Bulk.tokens(Prompt, true),
                                             Bulk.tokens(Prompt, false)};
    Bulk.appendData(L, {A}, {Prompt}, First);
    Single.appendData(L, {B}, {Prompt}, First);
    std::vector<std::vector<float>> Rest = {Bulk.tokens(More, true),
                                            Bulk.tokens(More, false)};
    Bulk.appendData(L, {A}, {More}, Rest);
    for (unsigned I = 0; I < More; ++I) {
      std::vector<std::vector<float>> One = {
          {Rest[0].begin() + I * Row, Rest[0].begin() + (I + 1) * Row},
          {Rest[1].begin() + I * Row, Rest[1].begin() + (I + 1) * Row}};
      Single.appendData(L, {B}, {1}, One);
    }
  }
  SequenceId Ia = Bulk.Seqs[A].Id, Ib = Single.Seqs[B].Id;
  for (unsigned L = 0; L < kLayers; ++L)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      SCOPED_TRACE(std::string(P.Name) + " " + toString(T) + " layer " +
                   std::to_string(L));
      SliceCounts Ca = *Bulk.C->counts(Ia, L), Cb = *Single.C->counts(Ib, L);
      EXPECT_EQ(Ca[T].Sink, Cb[T].Sink);
      EXPECT_EQ(Ca[T].Quantized, Cb[T].Quantized);
      EXPECT_EQ(Ca[T].Window, Cb[T].Window);
      EXPECT_EQ(*Bulk.C->readWindow(T, Ia, L), *Single.C->readWindow(T, Ib, L));
      EXPECT_EQ(*Bulk.C->readSink(T, Ia, L), *Single.C->readSink(T, Ib, L));
      unsigned Pages = *Bulk.C->numPages(T, Ia);
      EXPECT_EQ(Pages, *Single.C->numPages(T, Ib));
      for (unsigned Pg = 0; Pg < Pages; ++Pg)
        for (unsigned Hd = 0; Hd < P.KvHeads; ++Hd)
          EXPECT_EQ(*Bulk.C->readSlicePage(T, Ia, L, Hd, Pg),
                    *Single.C->readSlicePage(T, Ib, L, Hd, Pg))
              << "page " << Pg << " kv-head " << Hd;
      if (Bulk.tracked(L)) {
        EXPECT_EQ(*Bulk.C->readPoolEntries(T, Ia, L),
                  *Single.C->readPoolEntries(T, Ib, L));
      }
    }
  for (unsigned L = 0; L < kLayers; ++L)
    if (Bulk.tracked(L)) {
      EXPECT_EQ(*Bulk.C->readPoolIndex(Ia, L), *Single.C->readPoolIndex(Ib, L))
          << "pool index, layer " << L;
    }
  // Both also match the reference.
  Bulk.checkState(A, "bulk");
  Single.checkState(B, "single appends");
}

/// The PTX kernels, run by the interpreter through the device backend.
TEST_P(EndToEndTest, InterpreterMatchesTheReference) {
  const SpecParam &P = GetParam();
  std::string Error;
  std::unique_ptr<Cache> C = interpreterCache(P, 4, 16, Error);
  ASSERT_TRUE(C) << "PTX interpreter: " << Error;
  Harness H(P, std::move(C), 300);
  // The planner's shortest splits, 128 tokens: up to two for the first
  // three, six for the last.
  checkPrefillAndDecode(H, {1, 31, 200, 700}, "interpreter");
}

/// The PTX kernels on a GPU, where this machine has one (skipped where it
/// has not): each PTX target of the artifact that the device loads, JIT-
/// compiled by the driver, through the same checks as the interpreter's at
/// a context of several thousand tokens.
TEST_P(EndToEndTest, CudaMatchesTheReference) {
  const SpecParam &P = GetParam();
  Expected<std::unique_ptr<DeviceDriver>> Probe = createCudaDriver();
  if (!Probe.ok())
    GTEST_SKIP() << Probe.message();
  unsigned Sm = (*Probe)->smVersion();
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(P.Dir);
  ASSERT_TRUE(A.ok()) << A.message();
  unsigned Ran = 0;
  for (const std::string &Target : (*A)->ptxTargets()) {
    if (!choosePtxTarget(**A, Sm, Target).ok())
      continue; // newer than the device
    SCOPED_TRACE(Target + " on " + (*Probe)->name());
    Expected<std::unique_ptr<DeviceDriver>> Driver = createCudaDriver();
    ASSERT_TRUE(Driver.ok()) << Driver.message();
    std::string Error;
    std::unique_ptr<Cache> C =
        deviceCache(P, 4, 128, std::move(*Driver), Target, Error);
    ASSERT_TRUE(C) << "CUDA, " << Target << ": " << Error;
    Harness H(P, std::move(C), 301);
    checkPrefillAndDecode(H, {1, 31, 700, 5000}, "cuda " + Target);
    ++Ran;
  }
  EXPECT_GT(Ran, 0u) << "no PTX target of the artifact loads on sm_" << Sm;
}

/// Windows are ring buffers (docs/KernelABI.md, "Window rings"): appends
/// until every ring's head has wrapped at least three times, in steps of
/// one token and of 37 (whose ring writes and flush reads straddle the
/// wrap), match the reference bit for bit, and so does attention, on the
/// CPU and on the PTX interpreter (37-token steps only there).
TEST_P(EndToEndTest, WindowRingsWrapSeveralTimes) {
  const SpecParam &P = GetParam();
  for (bool Interpreter : {false, true}) {
    std::string Error;
    std::unique_ptr<Cache> C =
        Interpreter ? interpreterCache(P, 2, 32, Error) : cpuCache(P, 2, 32);
    ASSERT_TRUE(C) << Error;
    std::string Where = Interpreter ? "interpreter" : "cpu";
    unsigned Capacity = std::max(C->manifest().Keys.WindowCapacity,
                                 C->manifest().Values.WindowCapacity);
    Harness H(P, std::move(C), 500);
    std::vector<unsigned> All = {H.addSequence(), H.addSequence()};
    for (unsigned L = 0; L < kLayers; ++L)
      H.append(L, All, {5, 140});
    unsigned Appended = 0;
    for (unsigned Step = 0; Appended < 3 * Capacity + 7; ++Step) {
      unsigned N = Interpreter || Step % 5 == 4 ? 37 : 1;
      for (unsigned L = 0; L < kLayers; ++L)
        H.append(L, All, {N, N});
      Appended += N;
      if (Step % 64 == 63)
        for (unsigned S : All)
          H.checkState(S, Where + ", step " + std::to_string(Step));
      if (::testing::Test::HasFailure())
        return;
    }
    for (unsigned S : All)
      H.checkState(S, Where + ", after the rings wrapped");
    for (unsigned L = 0; L < kLayers; ++L)
      H.checkAttention(L, All, Where + ", after the rings wrapped");
  }
}

/// One batch whose sequences need different numbers of splits: splits past
/// the end of a shorter sequence must contribute nothing (KernelABI.md:
/// "A split past a sequence's end writes m = -inf, l = 0").
TEST_P(EndToEndTest, MixedSplitCountsInOneBatch) {
  const SpecParam &P = GetParam();
  for (bool Interpreter : {false, true}) {
    std::string Error;
    std::unique_ptr<Cache> C =
        Interpreter ? interpreterCache(P, 3, 16, Error) : cpuCache(P, 3, 16);
    ASSERT_TRUE(C) << Error;
    Harness H(P, std::move(C), 400);
    std::vector<unsigned> All = {H.addSequence(), H.addSequence(),
                                 H.addSequence()};
    for (unsigned L = 0; L < kLayers; ++L)
      H.append(L, All, {600, 1, 300});
    H.checkAttention(0, All, Interpreter ? "interpreter" : "cpu");
  }
}

/// OTT ties: repeated tokens have equal key norms, so the pool takes the
/// oldest of them (docs/Numerics.md, "Outlier tokens (OTT)"), on the CPU
/// and on the interpreter alike.
TEST(OttEndToEndTest, RepeatedTokensTieToTheOlder) {
  const SpecParam &P = *std::find_if(
      std::begin(kSpecs), std::end(kSpecs),
      [](const SpecParam &S) { return S.Kind == SchemeKind::Ott; });
  for (bool Interpreter : {false, true}) {
    std::string Error;
    std::unique_ptr<Cache> C =
        Interpreter ? interpreterCache(P, 1, 8, Error) : cpuCache(P, 1, 8);
    ASSERT_TRUE(C) << Error;
    Harness H(P, std::move(C), 600);
    unsigned S = H.addSequence();
    const unsigned N = 120, Distinct = 5;
    size_t Row = H.rowElems();
    for (unsigned L = 0; L < kLayers; ++L) {
      std::vector<float> K = H.tokens(Distinct, true),
                         V = H.tokens(Distinct, false);
      std::vector<std::vector<float>> Data(2);
      for (unsigned T = 0; T < N; ++T)
        for (unsigned X = 0; X < 2; ++X)
          Data[X].insert(Data[X].end(),
                         (X ? V : K).begin() + (T % Distinct) * Row,
                         (X ? V : K).begin() + (T % Distinct + 1) * Row);
      H.appendData(L, {S}, {N}, Data);
    }
    H.checkState(S, Interpreter ? "interpreter, ties" : "cpu, ties");
    H.checkAttention(kOttFirstLayer, {S},
                     Interpreter ? "interpreter, ties" : "cpu, ties");
  }
}

/// Runs Body on a CPU cache with room for a Tokens-token sequence, for
/// every key_norm spec of kSpecs (at least two).
void forEachKeyNormSpec(unsigned Tokens, uint32_t Seed,
                        const std::function<void(Harness &)> &Body) {
  unsigned Tested = 0;
  for (const SpecParam &P : kSpecs) {
    if (!referenceConfig(P).keyNorm)
      continue;
    SCOPED_TRACE(P.Name);
    Expected<std::shared_ptr<const Artifact>> A = Artifact::open(P.Dir);
    ASSERT_TRUE(A.ok()) << A.message();
    unsigned PageTokens = (*A)->manifest().PageTokens;
    Harness H(P, cpuCache(P, 1, (Tokens + PageTokens - 1) / PageTokens + 2),
              Seed);
    Body(H);
    ++Tested;
  }
  EXPECT_GE(Tested, 2u) << "the key_norm specs of kSpecs";
}

/// A prompt long enough for the key-norm kernel's most chunks, the last of
/// them empty (32769 tokens: 256 chunks of 129), matches the reference's
/// norms, codes and parameters (CPU; every key_norm spec). Every channel's
/// largest |K| is on the prompt's last token or on the first of a chunk, so
/// a chunk that misses a token changes a norm.
TEST(KeyNormEndToEndTest, LongPromptSpansEveryChunk) {
  constexpr unsigned Tokens = 32769, ChunkStart = 100 * 129;
  forEachKeyNormSpec(Tokens, 700, [&](Harness &H) {
    unsigned Seq = H.addSequence();
    std::vector<float> K = H.tokens(Tokens, true), V = H.tokens(Tokens, false);
    size_t Row = H.rowElems();
    for (size_t E = 0; E < Row; ++E) {
      float Big = (E % 3 ? 64.0f : -64.0f) + float(E % 7);
      (E % 2 ? K[ChunkStart * Row + E] : K[(Tokens - 1) * Row + E]) = Big;
    }
    H.appendData(0, {Seq}, {Tokens}, {K, V});
    H.checkState(Seq, "long prompt");
  });
}

/// A first append of host keys to a key_norm layer on the CPU is validated
/// by the key-norm kernel's chunk maxima, not by a scan of the keys
/// (docs/Reliability.md): a NaN of either sign inside a chunk (after
/// larger keys of its channel), an infinity on a chunk's first token and
/// one on the prompt's last are each reported where they are; the sequence
/// keeps no tokens and no norms, nor after a NaN value the value flush
/// finds; the prompt made finite then matches the reference (every
/// key_norm spec; 1000 tokens are 8 chunks of 125).
TEST(KeyNormEndToEndTest, NonFiniteKeysAreFoundByTheNormKernel) {
  constexpr unsigned Tokens = 1000;
  struct Bad {
    unsigned Token, Head, Channel;
    uint16_t Bits;
  };
  const Bad Cases[] = {{300, 1, 5, 0x7e00},
                       {301, 0, 0, 0xfe01},
                       {375, 1, 17, 0x7c00},
                       {Tokens - 1, 0, 63, 0xfc00}};
  forEachKeyNormSpec(Tokens, 701, [&](Harness &H) {
    const SpecParam &P = H.P;
    unsigned Seq = H.addSequence();
    SequenceId Id = H.Seqs[Seq].Id;
    std::vector<float> K = H.tokens(Tokens, true), V = H.tokens(Tokens, false);
    size_t Row = H.rowElems();
    for (unsigned T = 250; T < 300; ++T)
      K[T * Row + P.HeadDim + 5] = 100.0f + float(T);
    std::vector<uint16_t> Values = Harness::toBits(V);
    for (const Bad &B : Cases) {
      unsigned Channel = B.Channel % P.HeadDim, Head = B.Head % P.KvHeads;
      std::vector<uint16_t> Keys = Harness::toBits(K);
      Keys[B.Token * Row + Head * P.HeadDim + Channel] = B.Bits;
      Status S = H.C->append(0, {{Id, Tokens, Keys.data(), Values.data()}});
      ASSERT_FALSE(S.ok());
      std::string Want = "non-finite key at token " + std::to_string(B.Token) +
                         ", kv-head " + std::to_string(Head) + ", channel " +
                         std::to_string(Channel);
      EXPECT_NE(S.message().find(Want), std::string::npos) << S.message();
      Expected<SliceCounts> Counts = H.C->counts(Id, 0);
      ASSERT_TRUE(Counts.ok()) << Counts.message();
      for (Tensor T : {Tensor::Keys, Tensor::Values})
        EXPECT_EQ((*Counts)[T].total(), 0u);
      Expected<std::vector<float>> Norms = H.C->readKeyNorms(Id, 0);
      ASSERT_TRUE(Norms.ok()) << Norms.message();
      EXPECT_TRUE(Norms->empty());
    }
    // A NaN value among the tokens the value flush reads: the norms the
    // append computed (and its key flush) are undone.
    std::vector<uint16_t> Keys = Harness::toBits(K), Bad = Values;
    Bad[300 * Row + 7] = 0x7e00;
    Status S = H.C->append(0, {{Id, Tokens, Keys.data(), Bad.data()}});
    ASSERT_FALSE(S.ok());
    EXPECT_NE(S.message().find("non-finite value at token 300, kv-head 0, "
                               "channel 7"),
              std::string::npos)
        << S.message();
    EXPECT_EQ((*H.C->counts(Id, 0))[Tensor::Keys].total(), 0u);
    EXPECT_TRUE(H.C->readKeyNorms(Id, 0)->empty());
    H.appendData(0, {Seq}, {Tokens}, {K, V});
    H.checkState(Seq, "finite prompt after rejected ones");
  });
}

/// Every byte an append may change, for sequences Ids: counts, sinks,
/// windows, key norms, every layer's slices of every page held, free pages
/// and memory in use.
std::vector<std::vector<uint8_t>>
cacheBytes(Harness &H, const std::vector<SequenceId> &Ids) {
  Cache &C = *H.C;
  std::vector<std::vector<uint8_t>> Out;
  auto number = [&](uint64_t X) {
    Out.push_back(std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&X),
                                       reinterpret_cast<uint8_t *>(&X + 1)));
  };
  for (SequenceId Id : Ids)
    for (unsigned L = 0; L < kLayers; ++L) {
      SliceCounts Counts = *C.counts(Id, L);
      for (Tensor T : {Tensor::Keys, Tensor::Values}) {
        for (unsigned N :
             {Counts[T].Sink, Counts[T].Quantized, Counts[T].Window})
          number(N);
        Out.push_back(*C.readSink(T, Id, L));
        Out.push_back(*C.readWindow(T, Id, L));
        unsigned Pages = *C.numPages(T, Id);
        number(Pages);
        for (unsigned Pg = 0; Pg < Pages; ++Pg)
          for (unsigned Hd = 0; Hd < H.P.KvHeads; ++Hd)
            Out.push_back(*C.readSlicePage(T, Id, L, Hd, Pg));
      }
      if (H.Config.keyNorm) {
        std::vector<float> Norms = *C.readKeyNorms(Id, L);
        Out.push_back(std::vector<uint8_t>(
            reinterpret_cast<uint8_t *>(Norms.data()),
            reinterpret_cast<uint8_t *>(Norms.data() + Norms.size())));
      }
    }
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    number(C.freePages(T));
  number(C.memoryStats().BytesUsed);
  return Out;
}

/// On the CPU the flushes check the host tokens they read in place, and
/// the runtime scans only the rest (docs/Reliability.md): a NaN or an
/// infinity anywhere in a batch's keys or values, among the tokens a flush
/// reads or those the sink and window keep, is rejected and named, and the
/// cache is left byte for byte as it was, for a sequence whose layer 1
/// continues a page and fills pages layer 0 holds, and for a new sequence
/// (its first key norms undone); the finite batch then matches the
/// reference.
TEST_P(EndToEndTest, NonFiniteTokensAreRejectedWhereverTheyAre) {
  const SpecParam &P = GetParam();
  Harness H(P, cpuCache(P, 2, 160), 702);
  unsigned A = H.addSequence(), B = H.addSequence();
  H.append(0, {A}, {900});
  H.append(1, {A}, {50});
  constexpr unsigned Tokens = 600;
  std::vector<std::vector<float>> Data;
  for (unsigned I = 0; I < 2; ++I) {
    Data.push_back(H.tokens(Tokens, true));
    Data.push_back(H.tokens(Tokens, false));
  }
  struct Bad {
    unsigned Item;
    bool Keys;
    unsigned Token, Head, Channel;
    uint16_t Bits;
  };
  const Bad Cases[] = {{0, true, 0, 1, 5, 0x7e00},
                       {1, false, 200, 0, 63, 0x7c00},
                       {1, true, 1, 0, 0, 0xfc00},
                       {0, false, 333, 1, 17, 0xfe01},
                       {1, false, Tokens - 1, 1, 2, 0x7c00}};
  std::vector<SequenceId> Ids = {H.Seqs[A].Id, H.Seqs[B].Id};
  std::vector<std::vector<uint8_t>> Before = cacheBytes(H, Ids);
  size_t Row = H.rowElems();
  for (const Bad &X : Cases) {
    unsigned Head = X.Head % P.KvHeads, Channel = X.Channel % P.HeadDim;
    std::vector<std::vector<uint16_t>> Bits;
    for (const std::vector<float> &D : Data)
      Bits.push_back(Harness::toBits(D));
    Bits[2 * X.Item + (X.Keys ? 0 : 1)]
        [X.Token * Row + Head * P.HeadDim + Channel] = X.Bits;
    Status S =
        H.C->append(1, {{Ids[0], Tokens, Bits[0].data(), Bits[1].data()},
                        {Ids[1], Tokens, Bits[2].data(), Bits[3].data()}});
    ASSERT_FALSE(S.ok());
    std::string Want = std::string("non-finite ") + (X.Keys ? "key" : "value") +
                       " at token " + std::to_string(X.Token) + ", kv-head " +
                       std::to_string(Head) + ", channel " +
                       std::to_string(Channel) + " of sequence " +
                       std::to_string(Ids[X.Item]);
    EXPECT_NE(S.message().find(Want), std::string::npos) << S.message();
    EXPECT_TRUE(cacheBytes(H, Ids) == Before) << Want;
  }
  H.appendData(1, {A, B}, {Tokens, Tokens}, Data);
  H.checkState(A, "after rejected batches");
  H.checkState(B, "after rejected batches");
}

/// A sequence without tokens attends to zero (the reference's convention),
/// alone and next to a one-token sequence.
TEST_P(EndToEndTest, EmptySequenceAttendsToZero) {
  const SpecParam &P = GetParam();
  Harness H(P, cpuCache(P, 2, 4), 500);
  std::vector<unsigned> All = {H.addSequence(), H.addSequence()};
  H.append(0, {All[1]}, {1});
  H.checkAttention(0, {All[0]}, "empty sequence");
  H.checkAttention(0, All, "empty and one-token sequences");
}

/// A cache of two sequences and 16 pages for spec P, on the CPU or the PTX
/// interpreter.
std::unique_ptr<Cache> smallCache(const SpecParam &P, bool Interpreter,
                                  std::string &Error) {
  return Interpreter ? interpreterCache(P, 2, 16, Error) : cpuCache(P, 2, 16);
}

/// Two sequences of 300 and 37 tokens in every layer.
std::vector<unsigned> appendTwoSequences(Harness &H) {
  std::vector<unsigned> All = {H.addSequence(), H.addSequence()};
  for (unsigned L = 0; L < kLayers; ++L)
    H.append(L, All, {300, 37});
  return All;
}

/// With pre-RoPE keys the query may come unrotated: the kernels rotate it to
/// the last token's position of each sequence, on the CPU and in the PTX.
/// Every other spec rejects such a query and leaves the cache as it was.
TEST_P(EndToEndTest, UnrotatedQuery) {
  const SpecParam &P = GetParam();
  for (bool Interpreter : {false, true}) {
    std::string Error;
    std::unique_ptr<Cache> C = smallCache(P, Interpreter, Error);
    ASSERT_TRUE(C) << Error;
    Harness H(P, std::move(C), 600);
    std::vector<unsigned> All = appendTwoSequences(H);
    std::string Context = Interpreter ? "interpreter" : "cpu";
    if (H.Config.rope.enabled()) {
      for (unsigned L = 0; L < kLayers; ++L)
        H.checkAttention(L, All, Context + ", unrotated query", {},
                         QueryRope::Unrotated);
      continue;
    }
    std::vector<uint16_t> Q(2 * P.Heads * P.HeadDim, 0);
    std::vector<float> Out(Q.size(), 0.0f);
    Status St = H.C->attend(0, {H.Seqs[0].Id, H.Seqs[1].Id}, Q.data(),
                            Out.data(), QueryRope::Unrotated);
    ASSERT_FALSE(St.ok());
    EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(St.message(), "attend: an unrotated query needs pre-RoPE keys; "
                            "layer 0's keys are not");
    for (unsigned S : All)
      H.checkState(S, Context + ", after a rejected unrotated query");
  }
}

/// Several queries per sequence in one call (chunked prefill, speculative
/// verification): each row attends a causal prefix, cut in the sink, the
/// quantized tokens or the window, on the CPU and through the PTX
/// interpreter. In a layer with OTT pools a query must see every quantized
/// token: one that would not is refused, and the cache is unchanged.
TEST_P(EndToEndTest, SeveralQueriesAttendTheirCausalPrefixes) {
  const SpecParam &P = GetParam();
  for (bool Interpreter : {false, true}) {
    std::string Error;
    std::unique_ptr<Cache> C = smallCache(P, Interpreter, Error);
    ASSERT_TRUE(C) << Error;
    Harness H(P, std::move(C), 700);
    std::vector<unsigned> All = appendTwoSequences(H);
    // A query per token on the CPU; the interpreter is slow: fewer rows,
    // still across a region's end.
    std::vector<unsigned> Counts = Interpreter ? std::vector<unsigned>{40, 3}
                                               : std::vector<unsigned>{300, 37};
    std::string Context = Interpreter ? "interpreter" : "cpu";
    QueryRope Rope =
        H.Config.rope.enabled() ? QueryRope::Unrotated : QueryRope::Rotated;
    for (unsigned L = 0; L < kLayers; ++L) {
      if (!H.tracked(L)) {
        H.checkCausalAttention(L, All, Counts, Context + ", causal rows", Rope);
        continue;
      }
      // The most queries that see every quantized token: the window's, and
      // the query of the token before it.
      std::vector<unsigned> Most;
      for (unsigned I : All) {
        Expected<SliceCounts> N = H.C->counts(H.Seqs[I].Id, L);
        ASSERT_TRUE(N.ok()) << N.message();
        Most.push_back(std::min(N->Keys.Window, N->Values.Window) + 1);
      }
      H.checkCausalAttention(L, All, Most, Context + ", causal rows", Rope);
      std::vector<unsigned> TooMany = {Most[0] + 1, 1};
      std::vector<uint16_t> Q((TooMany[0] + 1) * P.Heads * P.HeadDim, 0);
      std::vector<float> Out(Q.size(), 0.0f);
      Status St = H.C->attend(L, {H.Seqs[All[0]].Id, H.Seqs[All[1]].Id},
                              TooMany, Q.data(), Out.data(), Rope);
      ASSERT_FALSE(St.ok());
      EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(St.message().find("keeps OTT outlier pools, so each query "
                                  "must see every quantized token"),
                std::string::npos)
          << St.message();
      for (unsigned S : All)
        H.checkState(S, Context + ", after a refused causal attend");
    }
  }
}

/// A segment appended at once (a flush only with its first token) and its
/// queries attended in one call give, bit for bit, what appending and
/// attending one token at a time gives (splits pinned to the granule by a
/// plan): each query's descriptor row is the one-token call's. After a
/// short prompt (sink and window rows) and a long one (quantized tokens
/// too; a full window of flush unit 1 allows segments of one token).
void checkSegment(const SpecParam &P, bool Interpreter, unsigned Prompt) {
  std::string Error;
  std::unique_ptr<Cache> CA = smallCache(P, Interpreter, Error);
  std::unique_ptr<Cache> CB = smallCache(P, Interpreter, Error);
  ASSERT_TRUE(CA && CB) << Error;
  Harness A(P, std::move(CA), 900), B(P, std::move(CB), 900);
  A.addSequence();
  B.addSequence();
  std::vector<std::vector<float>> Data = {A.tokens(Prompt, true),
                                          A.tokens(Prompt, false)};
  for (unsigned L = 0; L < kLayers; ++L) {
    A.appendData(L, {0}, {Prompt}, Data);
    B.appendData(L, {0}, {Prompt}, Data);
  }
  // As kvq.hf's segments: up to the next flush but one.
  unsigned N = 6;
  for (unsigned L = 0; L < kLayers; ++L)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const TensorLayout &Window = B.C->manifest().tensor(T);
      Expected<SliceCounts> Held = B.C->counts(B.Seqs[0].Id, L);
      ASSERT_TRUE(Held.ok()) << Held.message();
      unsigned Free = Window.Sink - (*Held)[T].Sink + Window.WindowCapacity -
                      (*Held)[T].Window;
      N = std::min(N, Free ? Free : Window.Flush);
    }
  size_t Row = A.rowElems(), QRow = size_t(P.Heads) * P.HeadDim;
  std::vector<float> K = A.tokens(N, true), V = A.tokens(N, false);
  std::vector<uint16_t> Q =
      Harness::toBits(A.tokens(N * P.Heads / P.KvHeads, false));
  unsigned Granule = B.C->manifest().SplitGranule;
  // One token at a time: every layer appends it, then attends its query.
  std::vector<float> OneByOne(kLayers * N * QRow), Segment(OneByOne.size());
  for (unsigned J = 0; J < N; ++J) {
    std::vector<std::vector<float>> Token = {
        std::vector<float>(K.begin() + J * Row, K.begin() + (J + 1) * Row),
        std::vector<float>(V.begin() + J * Row, V.begin() + (J + 1) * Row)};
    for (unsigned L = 0; L < kLayers; ++L)
      A.appendData(L, {0}, {1}, Token);
    Expected<AttendPlan> Plan = A.C->planAttend({A.Seqs[0].Id}, 0, Granule);
    ASSERT_TRUE(Plan.ok()) << Plan.message();
    for (unsigned L = 0; L < kLayers; ++L)
      ASSERT_TRUE(
          A.C->attend(L, *Plan, &Q[J * QRow], &OneByOne[(L * N + J) * QRow])
              .ok());
  }
  // The segment: one append, one call of N queries.
  for (unsigned L = 0; L < kLayers; ++L)
    B.appendData(L, {0}, {N}, {K, V});
  Expected<AttendPlan> Plan = B.C->planAttend({B.Seqs[0].Id}, 0, Granule, {N});
  ASSERT_TRUE(Plan.ok()) << Plan.message();
  for (unsigned L = 0; L < kLayers; ++L) {
    Status St = B.C->attend(L, *Plan, Q.data(), &Segment[L * N * QRow]);
    ASSERT_TRUE(St.ok()) << St.message();
  }
  EXPECT_EQ(std::memcmp(OneByOne.data(), Segment.data(),
                        OneByOne.size() * sizeof(float)),
            0)
      << (Interpreter ? "interpreter" : "cpu") << ": a segment of " << N
      << " tokens after " << Prompt;
}

TEST_P(EndToEndTest, ASegmentAttendsAsOneTokenAtATime) {
  for (bool Interpreter : {false, true})
    for (unsigned Prompt : {12u, 300u})
      checkSegment(GetParam(), Interpreter, Prompt);
}

/// Query counts a sequence cannot have are refused before anything runs.
TEST_P(EndToEndTest, QueryCountsAreChecked) {
  const SpecParam &P = GetParam();
  Harness H(P, cpuCache(P, 2, 16), 800);
  ASSERT_TRUE(H.C);
  std::vector<unsigned> All = {H.addSequence(), H.addSequence()};
  H.append(0, All, {5, 3});
  std::vector<SequenceId> Ids = {H.Seqs[All[0]].Id, H.Seqs[All[1]].Id};
  std::vector<uint16_t> Q(8 * P.Heads * P.HeadDim, 0);
  std::vector<float> Out(Q.size(), 0.0f);
  auto expectRefused = [&](const std::vector<unsigned> &Counts,
                           const std::string &Message) {
    Status St = H.C->attend(0, Ids, Counts, Q.data(), Out.data());
    ASSERT_FALSE(St.ok());
    EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(St.message().find(Message), std::string::npos) << St.message();
  };
  expectRefused({1}, "attend: 1 query counts for 2 sequences");
  expectRefused({0, 1}, "has 0 queries and 5 tokens in layer 0");
  expectRefused({5, 4}, "has 4 queries and 3 tokens in layer 0");
  for (auto [Counts, Message] :
       {std::pair(std::vector<unsigned>{1}, "1 query counts for 2 sequences"),
        std::pair(std::vector<unsigned>{0, 1}, "a sequence with 0 queries")}) {
    Expected<AttendPlan> Plan = H.C->planAttend(Ids, 0, 0, Counts);
    ASSERT_FALSE(Plan.ok());
    EXPECT_NE(Plan.message().find(Message), std::string::npos)
        << Plan.message();
  }
  // Layer 1 holds nothing yet: no query has its token there.
  Status St = H.C->attend(1, Ids, {1, 1}, Q.data(), Out.data());
  EXPECT_FALSE(St.ok());
  for (unsigned S : All)
    H.checkState(S, "after refused query counts");
}

/// Pre-RoPE keys deep into a long context: angles up to 7e4 radians for the
/// fastest pair, where a sloppy range reduction of the kernels' sin and cos
/// would show (CPU; the PTX runs the same arithmetic, from the same builder).
class PreRopeTest : public ::testing::TestWithParam<SpecParam> {};

TEST_P(PreRopeTest, LongContextRotation) {
  const SpecParam &P = GetParam();
  Harness H(P, cpuCache(P, 1, 600), 800);
  ASSERT_TRUE(H.Config.rope.enabled());
  unsigned S = H.addSequence();
  H.append(0, {S}, {70000});
  H.checkAttention(0, {S}, "70000 tokens");
  H.checkAttention(0, {S}, "70000 tokens, unrotated query", {},
                   QueryRope::Unrotated);
}

/// The first `Count` tokens from `First` of a [tokens][heads][D] array.
std::vector<float> tokenRange(const std::vector<float> &All, unsigned First,
                              unsigned Count, size_t Row) {
  return std::vector<float>(All.begin() + First * Row,
                            All.begin() + (First + Count) * Row);
}

/// The reference's rotation of the model's keys before RoPE gives its keys
/// after RoPE, up to their f16 rounding: the spec states SmolLM2's RoPE
/// (style, theta, positions from 0) as the model applies it.
void expectRotationMatchesModel(const ref::RopeConfig &Rope,
                                const std::vector<float> &Pre,
                                const std::vector<float> &Post, size_t Row,
                                unsigned D) {
  double MaxErr = 0, MaxRef = 0;
  std::vector<double> Key(D);
  for (size_t First = 0; First < Pre.size(); First += D) {
    int Token = int(First / Row);
    Key.assign(Pre.begin() + First, Pre.begin() + First + D);
    ref::rotate(Rope, Token, Key.data());
    for (unsigned C = 0; C < D; ++C) {
      MaxRef = std::max(MaxRef, std::fabs(double(Post[First + C])));
      MaxErr = std::max(MaxErr, std::fabs(Key[C] - double(Post[First + C])));
    }
  }
  EXPECT_LE(MaxErr, 2e-3 * MaxRef) << "rotated keys differ from the model's";
}

/// SmolLM2-135M's keys, values and queries (Inputs/smollm2-activations.bin,
/// written by `python -m kvq.activations`) instead of synthetic tokens: real
/// outlier channels and value statistics, from two of its layers, with the
/// model's 64-channel heads assigned to the spec's heads cyclically (two
/// per head for head_dim 128). A prompt in one append, then single-token
/// appends; every region bit for bit, and attention with the model's
/// queries of the last token.
TEST_P(EndToEndTest, RealActivationsMatchTheReference) {
  const SpecParam &P = GetParam();
  static const std::optional<test::RealActivations> Real =
      test::RealActivations::load(KVQ_REAL_ACTIVATIONS);
  ASSERT_TRUE(Real) << "cannot read " << KVQ_REAL_ACTIVATIONS;
  ASSERT_EQ(P.HeadDim % Real->HeadDim, 0u);
  Harness H(P, cpuCache(P, 1, 64), 7);
  unsigned S = H.addSequence();
  const unsigned Decode = 16, Prompt = Real->Tokens - Decode;
  const size_t Row = H.rowElems();
  for (unsigned L = 0; L < kLayers; ++L) {
    unsigned Captured = L + 1; // the model's layers 15 and 29
    // Pre-RoPE specs cache the keys before RoPE; the query is the model's,
    // rotated at the last token's position.
    std::vector<float> K =
        Real->heads(Captured, H.Config.rope.enabled() ? "k_pre_rope" : "k",
                    P.KvHeads, P.HeadDim);
    std::vector<float> V = Real->heads(Captured, "v", P.KvHeads, P.HeadDim);
    if (P.Kind == SchemeKind::PreRopeKivi2)
      expectRotationMatchesModel(
          H.Config.rope, K, Real->heads(Captured, "k", P.KvHeads, P.HeadDim),
          Row, P.HeadDim);
    H.appendData(
        L, {S}, {Prompt},
        {tokenRange(K, 0, Prompt, Row), tokenRange(V, 0, Prompt, Row)});
    for (unsigned T = Prompt; T < Real->Tokens; ++T)
      H.appendData(L, {S}, {1},
                   {tokenRange(K, T, 1, Row), tokenRange(V, T, 1, Row)});
    std::vector<float> Q =
        tokenRange(Real->heads(Captured, "q", P.Heads, P.HeadDim),
                   Real->Tokens - 1, 1, size_t(P.Heads) * P.HeadDim);
    H.checkAttention(L, {S}, "SmolLM2 activations", Q);
  }
  H.checkState(S, "SmolLM2 activations");
}

std::string specName(const ::testing::TestParamInfo<SpecParam> &I) {
  return I.param.Name;
}

INSTANTIATE_TEST_SUITE_P(Specs, EndToEndTest, ::testing::ValuesIn(kSpecs),
                         specName);

/// The specs whose keys are pre-RoPE.
std::vector<SpecParam> preRopeSpecs() {
  std::vector<SpecParam> Specs;
  for (const SpecParam &P : kSpecs)
    if (referenceConfig(P).rope.enabled())
      Specs.push_back(P);
  return Specs;
}

INSTANTIATE_TEST_SUITE_P(Specs, PreRopeTest,
                         ::testing::ValuesIn(preRopeSpecs()), specName);

} // namespace
