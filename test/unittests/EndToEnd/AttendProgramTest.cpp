//===- AttendProgramTest.cpp - the attend program against the emitted kernel
//===//
//
// The attend kernel of full-precision caches built as a program
// (kvq-opt --kvq-attend-programs) computes what the emitted kernel does, on
// the CPU backend and on the PTX interpreter: the same appends and queries
// on a cache of each give outputs within
//   max |program - emitted| <= 2e-3 * max |emitted| + 1e-4
// (the kernels differ in summation order). The specs split calls into many
// splits (merged by the last block), cross sinks, pages and window rings,
// and tile 16 query heads a kv-head in two.
//
//===----------------------------------------------------------------------===//

#include "OneSequenceCache.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace kvq::runtime;

namespace {

struct Spec {
  const char *Name, *Emitted, *Program;
};

class AttendProgramTest : public ::testing::TestWithParam<Spec> {};

TEST_P(AttendProgramTest, MatchesTheEmittedKernel) {
  const Spec &P = GetParam();
  for (bool Interpreter : {false, true}) {
    SCOPED_TRACE(Interpreter ? "PTX interpreter" : "host code");
    // A sequence of 308 tokens: 20 pages of 16.
    auto Emitted = kvq::test::makeOneSequenceCache(P.Emitted, Interpreter, 24);
    auto Program = kvq::test::makeOneSequenceCache(P.Program, Interpreter, 24);
    ASSERT_TRUE(Emitted && Program);
    SequenceId EmittedSeq = *Emitted->addSequence();
    SequenceId ProgramSeq = *Program->addSequence();
    const Manifest &M = Emitted->manifest();
    size_t Row = size_t(M.Model.KvHeads) * M.Model.HeadDim;
    std::mt19937 Rng(11);
    auto Random = [&](size_t N) { return kvq::test::normalValues(Rng, N); };
    // A prompt of several pages and splits, then decode steps that move
    // tokens from the windows to the pages; the first query meets a
    // sequence of one token.
    for (unsigned N : {1u, 299u, 1u, 1u, 1u, 5u}) {
      SCOPED_TRACE("append of " + std::to_string(N));
      std::vector<float> K = Random(N * Row), V = Random(N * Row);
      ASSERT_TRUE(
          Emitted->append(0, {{EmittedSeq, N, K.data(), V.data()}}).ok());
      ASSERT_TRUE(
          Program->append(0, {{ProgramSeq, N, K.data(), V.data()}}).ok());
      std::vector<float> Q = Random(size_t(M.Model.Heads) * M.Model.HeadDim);
      std::vector<float> Want, Got;
      ASSERT_TRUE(Emitted->attendF32(0, {EmittedSeq}, Q, Want).ok());
      Status S = Program->attendF32(0, {ProgramSeq}, Q, Got);
      ASSERT_TRUE(S.ok()) << S.message();
      ASSERT_EQ(Got.size(), Want.size());
      double MaxRef = 0, MaxErr = 0;
      for (size_t I = 0; I < Want.size(); ++I) {
        MaxRef = std::max(MaxRef, double(std::fabs(Want[I])));
        MaxErr = std::max(MaxErr, double(std::fabs(Got[I] - Want[I])));
      }
      EXPECT_GT(MaxRef, 0.0);
      EXPECT_LE(MaxErr, 2e-3 * MaxRef + 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, AttendProgramTest,
    ::testing::Values(Spec{"fp_d64_gqa4", KVQ_ARTIFACT_DIR_E2E_FP_D64_GQA4,
                           KVQ_ARTIFACT_DIR_E2E_FP_D64_GQA4_PROGRAMS},
                      Spec{"fp_f32_d128_gqa16",
                           KVQ_ARTIFACT_DIR_E2E_FP_F32_D128_GQA16,
                           KVQ_ARTIFACT_DIR_E2E_FP_F32_D128_GQA16_PROGRAMS}),
    [](const ::testing::TestParamInfo<Spec> &Info) {
      return std::string(Info.param.Name);
    });

} // namespace
