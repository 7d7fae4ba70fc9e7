//===- CountersTest.cpp - Coalescing and bank-conflict counters -----------===//

#include "TestUtil.h"

#include <algorithm>
#include <numeric>

using namespace kvq::ptx;
using namespace kvq::ptx::test;

namespace {

class CountersTest : public DeviceFixture {
protected:
  /// Runs transpose.ptx's strided_copy with stride 0 (every thread reads
  /// in[0]) on `Blocks` blocks of `Threads` threads; its counters.
  const Counters &launchBroadcastCopy(unsigned Blocks, unsigned Threads) {
    uint64_t In = zeros(4), Out = zeros(Blocks * Threads * 4);
    Args A;
    A.add(In).add(Out).add(0);
    Status S = Driver.launch(kernel("strided_copy"), dim(Blocks), dim(Threads),
                             0, A.get());
    EXPECT_TRUE(S.ok()) << S.message();
    return Driver.lastCounters();
  }
};

TEST_F(CountersTest, CoalescedVersusStridedSectors) {
  loadCorpus("transpose.ptx");
  for (int Stride : {1, 2, 8, 32}) {
    uint64_t In = zeros(32 * 32 * 4), Out = zeros(32 * 4);
    Args A;
    A.add(In).add(Out).add(Stride);
    Status S =
        Driver.launch(kernel("strided_copy"), dim(1), dim(32), 0, A.get());
    ASSERT_TRUE(S.ok()) << S.message();
    const Counters &C = Driver.lastCounters();
    // One warp: a load of 32 floats Stride apart, a contiguous store.
    uint64_t LoadSectors = Stride >= 8 ? 32 : 4 * Stride;
    EXPECT_EQ(C.GlobalWarpAccesses, 2u);
    EXPECT_EQ(C.GlobalBytesRequested, 256u);
    EXPECT_EQ(C.GlobalSectors, LoadSectors + 4) << "stride " << Stride;
    EXPECT_DOUBLE_EQ(C.coalescingEfficiency(),
                     256.0 / ((LoadSectors + 4) * 32.0));
  }
}

TEST_F(CountersTest, DistinctSectorsOfALaunch) {
  loadCorpus("transpose.ptx");
  for (bool Counted : {false, true}) {
    Driver.setCountDistinctSectors(Counted);
    const Counters &C = launchBroadcastCopy(4, 32);
    // Four warps each read in[0] (one sector) and store 128 contiguous
    // bytes: 4 x (1 + 4) sector requests, of which 1 + 16 are distinct.
    EXPECT_EQ(C.GlobalSectors, 20u);
    EXPECT_EQ(C.GlobalDistinctSectors, Counted ? 17u : 0u);
  }
}

TEST_F(CountersTest, InstructionsByLine) {
  loadCorpus("transpose.ptx");
  std::string Text = readCorpus("transpose.ptx");
  // The line of strided_copy's only global load.
  size_t At = Text.find("ld.global.f32 \t%f1, [%rd6];",
                        Text.find(".entry strided_copy("));
  ASSERT_NE(At, std::string::npos);
  uint32_t LoadLine = 1 + std::count(Text.begin(), Text.begin() + At, '\n');
  for (bool Counted : {false, true}) {
    Driver.setCountLines(Counted);
    const Counters &C = launchBroadcastCopy(4, 64);
    if (!Counted) {
      EXPECT_TRUE(C.WarpInstructionsByLine.empty());
      continue;
    }
    // Straight-line code: every line once per warp (4 blocks x 2 warps),
    // and the lines add up to the launch.
    ASSERT_GT(C.WarpInstructionsByLine.size(), LoadLine);
    EXPECT_EQ(C.WarpInstructionsByLine[LoadLine], 8u);
    EXPECT_EQ(C.WarpInstructionsByLine[LoadLine - 1], 8u);
    EXPECT_EQ(std::accumulate(C.WarpInstructionsByLine.begin(),
                              C.WarpInstructionsByLine.end(), uint64_t(0)),
              C.WarpInstructions);
  }
}

TEST_F(CountersTest, SharedBankConflicts) {
  loadCorpus("transpose.ptx");
  for (bool Padded : {true, false}) {
    uint64_t In = zeros(32 * 32 * 4), Out = zeros(32 * 32 * 4);
    Args A;
    A.add(In).add(Out).add(32).add(32);
    Status S =
        Driver.launch(kernel(Padded ? "transpose_padded" : "transpose_naive"),
                      dim(1), dim(32, 8), 0, A.get());
    ASSERT_TRUE(S.ok()) << S.message();
    const Counters &C = Driver.lastCounters();
    // 8 warps x 4 stores and 4 loads. Row-wise stores never conflict; the
    // naive column read puts all 32 lanes in one bank: 31 extra wavefronts.
    EXPECT_EQ(C.SharedWarpAccesses, 64u);
    EXPECT_EQ(C.SharedBankConflicts, Padded ? 0u : 32u * 31u);
  }
}

/// Thread t asks for the 64-byte line at p + 64 t + off and loads nothing.
const char *const PrefetchLines = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry prefetch_lines(.param .u64 p, .param .u64 off)
{
  .reg .b32 %r<2>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [off];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 64;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd4, %rd4, %rd2;
  prefetch.global.L2 [%rd4];
  ret;
}
)";

/// A prefetch counts as its line's traffic (two sectors from a 32-byte
/// boundary, three from a 16-byte one) and changes no memory; one outside
/// every allocation is an error, as a load's would be.
TEST_F(CountersTest, PrefetchesCountTheirLines) {
  load(PrefetchLines);
  std::vector<uint32_t> Data(64);
  std::iota(Data.begin(), Data.end(), 1u);
  uint64_t Buffer = upload(Data);
  Driver.setCountDistinctSectors(true);
  for (uint64_t Off : {uint64_t(0), uint64_t(16)}) {
    Args A;
    A.add(Buffer).add(Off);
    Status S =
        Driver.launch(kernel("prefetch_lines"), dim(1), dim(3), 0, A.get());
    ASSERT_TRUE(S.ok()) << S.message();
    const Counters &C = Driver.lastCounters();
    EXPECT_EQ(C.GlobalWarpAccesses, 1u);
    EXPECT_EQ(C.GlobalBytesRequested, 3u * 64);
    // Lines from 16 bytes in share their end sectors: 3 x 2 + 1.
    EXPECT_EQ(C.GlobalDistinctSectors, Off ? 7u : 6u) << "offset " << Off;
  }
  EXPECT_EQ(download<uint32_t>(Buffer, 64), Data);
  Args Outside;
  Outside.add(Buffer).add(uint64_t(4 * 64));
  Status S =
      Driver.launch(kernel("prefetch_lines"), dim(1), dim(1), 0, Outside.get());
  EXPECT_FALSE(S.ok());
  EXPECT_NE(S.message().find("prefetch"), std::string::npos) << S.message();
}

TEST_F(CountersTest, InstructionClassesAddUp) {
  loadCorpus("reduce.ptx");
  uint64_t In = zeros(256 * 4), Out = zeros(4);
  Args A;
  A.add(In).add(Out).add(256);
  ASSERT_TRUE(
      Driver.launch(kernel("block_reduce"), dim(1), dim(256), 0, A.get()).ok());
  const Counters &C = Driver.lastCounters();
  uint64_t Sum = 0;
  for (uint64_t N : C.WarpInstructionsByClass)
    Sum += N;
  EXPECT_EQ(Sum, C.WarpInstructions);
  EXPECT_GT(C.WarpInstructionsByClass[static_cast<int>(InstClass::Sync)], 0u);
  EXPECT_GT(C.WarpInstructionsByClass[static_cast<int>(InstClass::Float)], 0u);
  EXPECT_LE(C.ThreadInstructions, C.WarpInstructions * 32);
  EXPECT_GT(C.ThreadInstructions, C.WarpInstructions * 8);
}

} // namespace
