//===- TestUtil.h - Helpers for the PTX interpreter tests ------*- C++ -*-===//

#ifndef KVQ_TEST_PTXINTERP_TESTUTIL_H
#define KVQ_TEST_PTXINTERP_TESTUTIL_H

#include "kvq/PTXInterp/InterpDriver.h"

#include "gtest/gtest.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace kvq::ptx::test {

inline std::string readCorpus(const std::string &Name) {
  std::ifstream In(std::string(KVQ_PTX_CORPUS_DIR) + "/" + Name);
  std::ostringstream OS;
  OS << In.rdbuf();
  return OS.str();
}

/// An InterpDriver plus typed buffer helpers and an argument list builder.
class DeviceFixture : public ::testing::Test {
protected:
  InterpDriver Driver;
  runtime::ModuleHandle Mod;

  void load(const std::string &PTX) {
    auto M = Driver.loadModule(PTX);
    ASSERT_TRUE(M.ok()) << M.message();
    Mod = *M;
  }
  void loadCorpus(const std::string &Name) {
    std::string Text = readCorpus(Name);
    ASSERT_FALSE(Text.empty()) << "missing corpus file " << Name;
    load(Text);
  }
  runtime::KernelHandle kernel(const std::string &Name) {
    auto K = Driver.getKernel(Mod, Name);
    EXPECT_TRUE(K.ok()) << K.message();
    return K.ok() ? *K : runtime::KernelHandle();
  }
  template <typename T> uint64_t upload(const std::vector<T> &Data) {
    auto P = Driver.allocate(Data.size() * sizeof(T));
    EXPECT_TRUE(P.ok());
    Status S = Driver.copyToDevice(*P, Data.data(), Data.size() * sizeof(T));
    EXPECT_TRUE(S.ok()) << S.message();
    return *P;
  }
  uint64_t zeros(size_t Bytes) {
    auto P = Driver.allocate(Bytes);
    EXPECT_TRUE(P.ok());
    return *P;
  }
  template <typename T> std::vector<T> download(uint64_t Ptr, size_t Count) {
    std::vector<T> Out(Count);
    Status S = Driver.copyToHost(Out.data(), Ptr, Count * sizeof(T));
    EXPECT_TRUE(S.ok()) << S.message();
    return Out;
  }
};

/// Argument storage for DeviceDriver::launch.
class Args {
public:
  template <typename T> Args &add(T V) {
    Storage.emplace_back(sizeof(T));
    std::memcpy(Storage.back().data(), &V, sizeof(T));
    return *this;
  }
  void **get() {
    Pointers.clear();
    for (auto &S : Storage)
      Pointers.push_back(S.data());
    return Pointers.data();
  }

private:
  std::vector<std::vector<uint8_t>> Storage;
  std::vector<void *> Pointers;
};

inline runtime::Dim3 dim(unsigned X, unsigned Y = 1, unsigned Z = 1) {
  runtime::Dim3 D;
  D.X = X;
  D.Y = Y;
  D.Z = Z;
  return D;
}

inline uint32_t bitsOf(float F) {
  uint32_t B;
  std::memcpy(&B, &F, 4);
  return B;
}
inline float floatOf(uint32_t B) {
  float F;
  std::memcpy(&F, &B, 4);
  return F;
}

} // namespace kvq::ptx::test

#endif // KVQ_TEST_PTXINTERP_TESTUTIL_H
