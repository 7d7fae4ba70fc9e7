//===- OutOfMemoryTest.cpp - Allocation failure is an error ---------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// Requests larger than the machine (or than the address space), and any
// request under a tight address-space limit (ulimit -v), must come back as
// ErrorCode::OutOfMemory with a message, never as a crash. Injected failures
// of every allocation of an append are in EndToEnd/AllocationFailureTest.
//
//===----------------------------------------------------------------------===//

#include "MockCache.h"

#include <fstream>

#include <sys/resource.h>

using namespace kvq::runtime;
using namespace kvq::runtime::mock;

namespace {

TEST(OutOfMemoryTest, HugeBackendRequestsAreErrors) {
  Expected<std::unique_ptr<Backend>> B = createCpuBackend(*openMock(), 1);
  ASSERT_TRUE(B.ok()) << B.message();
  // Past the address space, and close enough to SIZE_MAX that rounding up
  // to the alignment wraps around.
  for (size_t Bytes : {size_t(1) << 62, SIZE_MAX - 1, SIZE_MAX}) {
    Expected<DevicePtr> P = (*B)->allocate(Bytes);
    ASSERT_FALSE(P.ok()) << Bytes;
    EXPECT_EQ(P.status().code(), ErrorCode::OutOfMemory);
    EXPECT_EQ(P.message(), "cpu backend: out of memory allocating " +
                               std::to_string(Bytes) + " bytes");
  }
}

TEST(OutOfMemoryTest, CachesLargerThanTheAddressSpaceAreErrors) {
  CacheOptions O;
  O.MaxSequences = 1u << 31;
  O.PagesPerTensor = 1u << 31;
  Expected<std::unique_ptr<Cache>> C = Cache::create(openMock(), O);
  ASSERT_FALSE(C.ok());
  EXPECT_EQ(C.status().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(C.message(), "cache: allocating buffers failed: a cache buffer "
                         "would exceed the address space");
}

/// Under an address-space limit (ulimit -v) of what the process uses plus
/// 256 MiB, a 4 GiB cache fails cleanly and a small one still works. Runs
/// in a child process; ASan reserves terabytes of address space and cannot
/// run under such a limit.
TEST(OutOfMemoryTest, AddressSpaceLimitGivesAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers cannot run under an address-space limit";
#else
  std::shared_ptr<const Artifact> A = openMock();
  EXPECT_EXIT(
      {
        rlimit Limit;
        getrlimit(RLIMIT_AS, &Limit);
        std::ifstream Status("/proc/self/statm");
        size_t Pages = 0;
        Status >> Pages;
        Limit.rlim_cur = Pages * 4096 + (size_t(256) << 20);
        setrlimit(RLIMIT_AS, &Limit);
        CacheOptions O;
        O.PagesPerTensor = 1u << 24; // 256-byte pages: 4 GiB per tensor
        Expected<std::unique_ptr<Cache>> Big = Cache::create(A, O);
        bool Clean =
            !Big.ok() && Big.status().code() == ErrorCode::OutOfMemory &&
            Big.message().find("out of memory allocating") != std::string::npos;
        O.PagesPerTensor = 16;
        Clean = Clean && Cache::create(A, O).ok();
        std::exit(Clean ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
#endif
}

} // namespace
