//===- AttendProgramTest.cpp - the attend program against the emitted kernel
//===//
//
// The attend kernel built as a program computes what the emitted kernel
// does, on the CPU backend and on the PTX interpreter: the same appends and
// queries on a cache of each give outputs within
//   max |program - emitted| <= 2e-3 * max |emitted| + 1e-4
// (the kernels differ in summation order; 2e-2 where the program rounds
// its factors to 8 bits). Full-precision caches: the
// program (the default) against kvq-opt --kvq-attend-programs=false; the
// full-precision specs split calls into many splits (merged by the last
// block), cross sinks, pages and window rings, tile 16 query heads a
// kv-head in two, and hold a bf16 model's rows with host code for
// x86-64-v3. Quantized caches: --kvq-quantized-attend-programs against the
// emitted forms (the default), on specs with codes of 1 to 8 bits, spans
// of tokens and channels, sym, asym and hybrid modes, key norms, sinks,
// code sharing (every layer where a spec's layers differ), 12 and 16 query
// heads a kv-head, span=channels keys of 1, 2 and 4 groups a token, and a spec
// whose 64-token splits cut the value groups (read a group at a time between
// partial groups read an element at a time), and span=tokens keys behind sinks
// whose splits start anywhere in a group (the host's rows of tokens peeled to a
// group's word), again stating AVX-512 VNNI's i16 pair dots and, within 8-bit
// factors' own tolerance, its i8 quad dots (their host code skipped on a
// machine without them). On the PTX interpreter the group dots of the
// span=channels keys and span=tokens values of InnerQ's specs (1, 4 and 16
// heads a kv-head) run on the matrix unit (mma.sync).
//
//===----------------------------------------------------------------------===//

#include "OneSequenceCache.h"

#include "kvq/Support/HostFeatures.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>

using namespace kvq::runtime;

namespace {

struct Spec {
  const char *Name, *Emitted, *Program;
  /// The layers checked, from layer 0.
  unsigned Layers = 1;
  /// The largest |program - emitted| allowed, relative to the largest
  /// |emitted|.
  double Tolerance = 2e-3;
};

/// 8-bit factors' own tolerance (docs/Numerics.md, "Attention on integer
/// dots"): their rounding moves a score by up to 2^-8 of the head's largest
/// folded factor a channel's code, over the 2e-3 the other forms keep.
constexpr double kI8FactorTolerance = 2e-2;

class AttendProgramTest : public ::testing::TestWithParam<Spec> {};

/// The largest |got - want| within `Tolerance` of the largest |want|, plus
/// 1e-4.
void expectClose(const std::vector<float> &Got, const std::vector<float> &Want,
                 double Tolerance) {
  ASSERT_EQ(Got.size(), Want.size());
  double MaxRef = 0, MaxErr = 0;
  for (size_t I = 0; I < Want.size(); ++I) {
    MaxRef = std::max(MaxRef, double(std::fabs(Want[I])));
    MaxErr = std::max(MaxErr, double(std::fabs(Got[I] - Want[I])));
  }
  EXPECT_GT(MaxRef, 0.0);
  EXPECT_LE(MaxErr, Tolerance * MaxRef + 1e-4);
}

/// The CPU features the host code of the artifact in `dir` needs that
/// this machine lacks, space-separated; empty where it has them all.
std::string getMissingFeatures(const char *Dir) {
  auto A = Artifact::open(Dir);
  EXPECT_TRUE(A.ok()) << A.message();
  std::string Missing;
  if (A.ok())
    for (const std::string &Feature : (*A)->manifest().HostFeatures) {
      bool Known = false;
      if (!kvq::hostHasFeature(Feature, Known) || !Known)
        Missing += " " + Feature;
    }
  return Missing;
}

TEST_P(AttendProgramTest, MatchesTheEmittedKernel) {
  const Spec &P = GetParam();
  // The PTX interpreter first: host code for a CPU this machine is not
  // (AVX-512 VNNI's pair dots) is skipped after it.
  for (bool Interpreter : {true, false}) {
    SCOPED_TRACE(Interpreter ? "PTX interpreter" : "host code");
    if (!Interpreter)
      for (const char *Dir : {P.Emitted, P.Program})
        if (std::string Missing = getMissingFeatures(Dir); !Missing.empty())
          GTEST_SKIP() << "host code: this machine lacks" << Missing;
    // Two sequences, the longer of 308 tokens (20 pages of 16 a tensor).
    auto Emitted = kvq::test::makeTestCache(P.Emitted, Interpreter, 48, 2);
    auto Program = kvq::test::makeTestCache(P.Program, Interpreter, 48, 2);
    ASSERT_TRUE(Emitted && Program);
    SequenceId EmittedSeqs[2], ProgramSeqs[2];
    for (unsigned S = 0; S < 2; ++S) {
      EmittedSeqs[S] = *Emitted->addSequence();
      ProgramSeqs[S] = *Program->addSequence();
    }
    const Manifest &M = Emitted->manifest();
    size_t Row = size_t(M.Model.KvHeads) * M.Model.HeadDim;
    size_t QueryRow = size_t(M.Model.Heads) * M.Model.HeadDim;
    std::mt19937 Rng(11);
    auto Random = [&](size_t N) { return kvq::test::normalValues(Rng, N); };
    // A prompt of several pages and splits, then decode steps that move
    // tokens from the windows to the pages; the first query meets a
    // sequence of one token. The second sequence attends beside the first
    // from the third step on, at its own length.
    unsigned Steps[] = {1, 299, 1, 1, 1, 5};
    for (unsigned Step = 0; Step < 6; ++Step) {
      unsigned N = Steps[Step];
      SCOPED_TRACE("step " + std::to_string(Step));
      bool Both = Step >= 2;
      unsigned Count = Both ? 2 : 1;
      for (unsigned Layer = 0; Layer < P.Layers; ++Layer)
        for (unsigned S = 0; S < Count; ++S) {
          unsigned Tokens = S == 0 ? N : 17 * Step;
          std::vector<float> K = Random(Tokens * Row), V = Random(Tokens * Row);
          ASSERT_TRUE(Emitted
                          ->append(Layer, {{EmittedSeqs[S], Tokens, K.data(),
                                            V.data()}})
                          .ok());
          ASSERT_TRUE(Program
                          ->append(Layer, {{ProgramSeqs[S], Tokens, K.data(),
                                            V.data()}})
                          .ok());
        }
      std::vector<SequenceId> EmittedBatch(EmittedSeqs, EmittedSeqs + Count);
      std::vector<SequenceId> ProgramBatch(ProgramSeqs, ProgramSeqs + Count);
      for (unsigned Layer = 0; Layer < P.Layers; ++Layer) {
        SCOPED_TRACE("layer " + std::to_string(Layer));
        std::vector<float> Q = Random(Count * QueryRow);
        std::vector<float> Want, Got;
        ASSERT_TRUE(Emitted->attendF32(Layer, EmittedBatch, Q, Want).ok());
        Status S = Program->attendF32(Layer, ProgramBatch, Q, Got);
        ASSERT_TRUE(S.ok()) << S.message();
        expectClose(Got, Want, P.Tolerance);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, AttendProgramTest,
    ::testing::Values(
        Spec{"fp_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_FP_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_FP_D64_GQA4_PROGRAMS},
        Spec{"fp_f32_d128_gqa16", KVQ_ARTIFACT_DIR_E2E_FP_F32_D128_GQA16,
             KVQ_ARTIFACT_DIR_E2E_FP_F32_D128_GQA16_PROGRAMS},
        Spec{"fp_bf16_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_FP_BF16_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_FP_BF16_D64_GQA4_PROGRAMS},
        Spec{"kivi2_d64_gqa12", KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA12,
             KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA12_PROGRAMS},
        Spec{"innerq_base_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA4_PROGRAMS},
        // span=channels keys on i16 pair dots (a VNNI host): 4 groups a
        // token and one head (16 lanes a head); 2 groups and a tile of 8
        // of the 16 heads (2 lanes a head).
        Spec{"innerq_base_d128_gqa1",
             KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D128_GQA1,
             KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D128_GQA1_PROGRAMS},
        Spec{"innerq_base_d64_gqa16",
             KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA16,
             KVQ_ARTIFACT_DIR_E2E_INNERQ_BASE_D64_GQA16_PROGRAMS},
        Spec{"channel_row_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_CHANNEL_ROW_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_CHANNEL_ROW_D64_GQA4_PROGRAMS, 2},
        Spec{"innerq_hybrid_d64_gqa1",
             KVQ_ARTIFACT_DIR_E2E_INNERQ_HYBRID_D64_GQA1,
             KVQ_ARTIFACT_DIR_E2E_INNERQ_HYBRID_D64_GQA1_PROGRAMS},
        Spec{"xquant_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_XQUANT_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_XQUANT_D64_GQA4_PROGRAMS, 2},
        Spec{"vector_forms_d64_gqa4", KVQ_ARTIFACT_DIR_SHIPPED_VECTOR_FORMS,
             KVQ_ARTIFACT_DIR_E2E_VECTOR_FORMS_D64_GQA4_PROGRAMS, 5},
        Spec{"quant_splits_d64_gqa4",
             KVQ_ARTIFACT_DIR_E2E_QUANT_SPLITS_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_QUANT_SPLITS_D64_GQA4_PROGRAMS},
        Spec{"token_keys_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_TOKEN_KEYS_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_TOKEN_KEYS_D64_GQA4_PROGRAMS, 2},
        Spec{"token_pairs_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_TOKEN_PAIRS_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_TOKEN_PAIRS_D64_GQA4_PROGRAMS, 2},
        Spec{"token_quads_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_TOKEN_QUADS_D64_GQA4,
             KVQ_ARTIFACT_DIR_E2E_TOKEN_QUADS_D64_GQA4_PROGRAMS, 2,
             kI8FactorTolerance}),
    [](const ::testing::TestParamInfo<Spec> &Info) {
      return std::string(Info.param.Name);
    });

} // namespace
