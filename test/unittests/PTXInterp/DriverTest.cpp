//===- DriverTest.cpp - DeviceDriver implementations ----------------------===//

#include "TestUtil.h"

#include "kvq/Runtime/DeviceDriver.h"

#include <dlfcn.h>

#include <chrono>

using namespace kvq;
using namespace kvq::ptx::test;

namespace {

const char *const AddOne = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 p, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<5>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra $L_done;
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  add.s32 %r4, %r3, 1;
  st.global.u32 [%rd3], %r4;
$L_done:
  ret;
}
)";

/// Exercises a driver end to end with a tiny kernel.
void runAddOne(runtime::DeviceDriver &D) {
  auto M = D.loadModule(AddOne);
  ASSERT_TRUE(M.ok()) << M.message();
  auto K = D.getKernel(*M, "add_one");
  ASSERT_TRUE(K.ok()) << K.message();
  EXPECT_FALSE(D.getKernel(*M, "missing").ok());
  std::vector<uint32_t> Host(40);
  for (uint32_t I = 0; I < 40; ++I)
    Host[I] = I * 10;
  auto P = D.allocate(Host.size() * 4);
  ASSERT_TRUE(P.ok()) << P.message();
  ASSERT_TRUE(D.copyToDevice(*P, Host.data(), Host.size() * 4).ok());
  Args A;
  A.add(*P).add(uint32_t(33));
  ASSERT_TRUE(D.launch(*K, dim(1), dim(64), 0, A.get()).ok());
  ASSERT_TRUE(D.synchronize().ok());
  std::vector<uint32_t> Out(40);
  ASSERT_TRUE(D.copyToHost(Out.data(), *P, Out.size() * 4).ok());
  for (uint32_t I = 0; I < 40; ++I)
    EXPECT_EQ(Out[I], I * 10 + (I < 33)) << I;
  // A device-to-device copy, read back.
  auto Copy = D.allocate(Host.size() * 4);
  ASSERT_TRUE(Copy.ok()) << Copy.message();
  ASSERT_TRUE(D.copyWithin(*Copy, *P + 4, 36 * 4).ok());
  std::vector<uint32_t> Copied(36);
  ASSERT_TRUE(D.copyToHost(Copied.data(), *Copy, Copied.size() * 4).ok());
  for (uint32_t I = 0; I < 36; ++I)
    EXPECT_EQ(Copied[I], Out[I + 1]) << I;
  EXPECT_TRUE(D.free(*Copy).ok());
  ASSERT_TRUE(D.memset(*P, 0xab, 8).ok());
  ASSERT_TRUE(D.copyToHost(Out.data(), *P, 8).ok());
  EXPECT_EQ(Out[0], 0xababababu);
  EXPECT_TRUE(D.free(*P).ok());
}

bool haveCudaLibrary() {
  void *Lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (Lib)
    dlclose(Lib);
  return Lib != nullptr;
}

TEST(DriverTest, CudaDriverFailsCleanlyWithoutDriver) {
  if (haveCudaLibrary())
    GTEST_SKIP() << "libcuda.so.1 is present";
  auto D = runtime::createCudaDriver();
  ASSERT_FALSE(D.ok());
  EXPECT_EQ(D.message().rfind("no CUDA driver: libcuda.so.1 not found", 0), 0u)
      << D.message();
}

TEST(DriverTest, CudaDriverRunsKernel) {
  auto D = runtime::createCudaDriver();
  if (!D.ok()) {
    // No library, or a library without a usable device: both clean errors.
    EXPECT_TRUE(D.message().rfind("no CUDA driver", 0) == 0 ||
                D.message().rfind("CUDA driver initialization failed", 0) == 0)
        << D.message();
    GTEST_SKIP() << D.message();
  }
  EXPECT_EQ((*D)->name().rfind("cuda: ", 0), 0u);
  EXPECT_GE((*D)->smVersion(), 30u) << "a compute capability";
  runAddOne(**D);
}

/// A kernel timed by two events on a stream of the driver's own: the
/// elapsed time is positive and below the wall time around it.
TEST(DriverTest, CudaDriverTimesKernelsOnAStream) {
  auto D = runtime::createCudaDriver();
  if (!D.ok())
    GTEST_SKIP() << D.message();
  runtime::DeviceDriver &Cuda = **D;
  auto Stream = Cuda.createStream();
  ASSERT_TRUE(Stream.ok()) << Stream.message();
  auto Start = Cuda.createEvent(), End = Cuda.createEvent();
  ASSERT_TRUE(Start.ok() && End.ok()) << Start.message() << End.message();
  Cuda.setStream(*Stream);
  auto Wall = std::chrono::steady_clock::now();
  ASSERT_TRUE(Cuda.recordEvent(*Start).ok());
  runAddOne(Cuda);
  ASSERT_TRUE(Cuda.recordEvent(*End).ok());
  auto Seconds = Cuda.elapsedSeconds(*Start, *End);
  double WallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Wall)
          .count();
  ASSERT_TRUE(Seconds.ok()) << Seconds.message();
  EXPECT_GT(*Seconds, 0.0);
  EXPECT_LE(*Seconds, WallSeconds);
  Cuda.setStream(nullptr);
  EXPECT_TRUE(Cuda.destroyEvent(*Start).ok());
  EXPECT_TRUE(Cuda.destroyEvent(*End).ok());
  EXPECT_TRUE(Cuda.destroyStream(*Stream).ok());
}

/// The interpreter has no device clock: streams and events are a clean
/// Unsupported error, and it is no GPU (no SM version).
TEST(DriverTest, InterpDriverHasNoClock) {
  ptx::InterpDriver D;
  EXPECT_EQ(D.smVersion(), 0u);
  auto Event = D.createEvent();
  ASSERT_FALSE(Event.ok());
  EXPECT_EQ(Event.status().code(), runtime::ErrorCode::Unsupported);
  EXPECT_EQ(Event.message(),
            "ptx-interpreter: no device clock (streams and events)");
  EXPECT_FALSE(D.createStream().ok());
  EXPECT_FALSE(D.recordEvent(nullptr).ok());
  EXPECT_FALSE(D.elapsedSeconds(nullptr, nullptr).ok());
}

TEST(DriverTest, InterpDriverRunsKernels) {
  ptx::InterpDriver D;
  EXPECT_EQ(D.name(), "ptx-interpreter");
  runAddOne(D);
  EXPECT_GT(D.lastCounters().WarpInstructions, 0u);
}

TEST(DriverTest, InterpDriverModelsResidentBlocks) {
  ptx::InterpDriver D;
  auto M = D.loadModule(AddOne);
  ASSERT_TRUE(M.ok()) << M.message();
  auto K = D.getKernel(*M, "add_one");
  ASSERT_TRUE(K.ok()) << K.message();
  auto Blocks = [&](unsigned Threads) {
    auto N = D.residentBlocks(*K, dim(Threads), 0);
    EXPECT_TRUE(N.ok()) << N.message();
    return N.ok() ? *N : 0u;
  };
  // An H100's 132 SMs of 64K registers: at 128 registers per thread, 4
  // blocks of 128 threads per SM, 2 of 256, 16 of 32; a 1024-thread block
  // gets 64 registers per thread and one block per SM.
  EXPECT_EQ(Blocks(128), 132u * 4);
  EXPECT_EQ(Blocks(256), 132u * 2);
  EXPECT_EQ(Blocks(32), 132u * 16);
  EXPECT_EQ(Blocks(1024), 132u * 1);
  ptx::ModeledDevice Small;
  Small.Multiprocessors = 2;
  D.setModeledDevice(Small);
  EXPECT_EQ(Blocks(128), 2u * 4);
  EXPECT_FALSE(D.residentBlocks(runtime::KernelHandle{9}, dim(128), 0).ok());
}

TEST(DriverTest, InterpDriverChecksHostCopies) {
  ptx::InterpDriver D;
  auto P = D.allocate(16);
  ASSERT_TRUE(P.ok());
  uint8_t Buf[32] = {};
  runtime::Status S = D.copyToDevice(*P + 8, Buf, 16);
  EXPECT_FALSE(S.ok());
  EXPECT_NE(S.message().find("outside every device allocation"),
            std::string::npos)
      << S.message();
  EXPECT_FALSE(D.free(*P + 4).ok());
  EXPECT_TRUE(D.free(*P).ok());
  EXPECT_FALSE(D.free(*P).ok());
  EXPECT_FALSE(D.copyToHost(Buf, *P, 4).ok());
}

TEST(DriverTest, InterpDriverRejectsBadHandlesAndText) {
  ptx::InterpDriver D;
  EXPECT_FALSE(D.getKernel(runtime::ModuleHandle{7}, "x").ok());
  EXPECT_FALSE(
      D.launch(runtime::KernelHandle{3}, dim(1), dim(1), 0, nullptr).ok());
  auto M = D.loadModule(".version 7.0\n.target sm_80\n.address_size 32\n");
  ASSERT_FALSE(M.ok());
  EXPECT_NE(M.message().find("address_size"), std::string::npos);
}

} // namespace
