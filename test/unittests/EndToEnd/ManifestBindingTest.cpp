//===- ManifestBindingTest.cpp - manifests are bound to their kernels -----===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// A manifest edited against its kernels (head_dim, dtype, page or split
// tokens) loaded with status OK and gave wrong outputs or out-of-bounds
// kernel accesses. kvq-opt embeds the hash of the manifest's bytes in
// kernels.so and each PTX file; both backends refuse kernels whose hash is
// not the manifest's (kvq/ABI/ManifestBinding.h).
//
//===----------------------------------------------------------------------===//

#include "kvq/ABI/ManifestBinding.h"
#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Backend.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kvq::runtime;
namespace fs = std::filesystem;

namespace {

/// A copy of the compiled KIVI artifact whose manifest `Edit` rewrote.
std::string copyWithManifest(const std::string &Name,
                             void (*Edit)(std::string &)) {
  std::string Dir = ::testing::TempDir() + "kvq-binding-" + Name;
  fs::remove_all(Dir);
  fs::copy(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1, Dir);
  std::stringstream Text;
  Text << std::ifstream(Dir + "/manifest.json").rdbuf();
  std::string Manifest = Text.str();
  Edit(Manifest);
  std::ofstream(Dir + "/manifest.json", std::ios::trunc) << Manifest;
  return Dir;
}

/// The errors of the CPU and interpreter backends for artifact `Dir`
/// (empty where the backend was created).
std::pair<std::string, std::string> backendErrors(const std::string &Dir) {
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  EXPECT_TRUE(A.ok()) << A.message();
  if (!A.ok())
    return {};
  std::pair<std::string, std::string> Errors;
  Expected<std::unique_ptr<Backend>> Cpu = createCpuBackend(**A, 1);
  if (!Cpu.ok()) {
    EXPECT_EQ(Cpu.status().code(), ErrorCode::Artifact);
    Errors.first = Cpu.message();
  }
  Expected<std::unique_ptr<Backend>> Device = createDeviceBackend(
      **A, std::make_unique<kvq::ptx::InterpDriver>(), "sm_80");
  if (!Device.ok()) {
    EXPECT_EQ(Device.status().code(), ErrorCode::Artifact);
    Errors.second = Device.message();
  }
  return Errors;
}

void replace(std::string &Text, const std::string &From,
             const std::string &To) {
  size_t At = Text.find(From);
  ASSERT_NE(At, std::string::npos) << From;
  Text.replace(At, From.size(), To);
}

TEST(ManifestBindingTest, UnchangedArtifactLoads) {
  auto [Cpu, Device] = backendErrors(copyWithManifest("same", [](auto &) {}));
  EXPECT_EQ(Cpu, "");
  EXPECT_EQ(Device, "");
}

TEST(ManifestBindingTest, EditedFieldsAreRefusedByBothBackends) {
  const char *Refused = "manifest.json is not the one";
  // Each edit keeps the manifest valid on its own (a head_dim the pages do
  // not fit would be refused before the binding is checked).
  for (auto Edit :
       {+[](std::string &M) { replace(M, "\"sink\": 0", "\"sink\": 4"); },
        +[](std::string &M) {
          replace(M, "\"split_tokens\": 512", "\"split_tokens\": 1024");
        },
        +[](std::string &M) {
          replace(M, "\"dtype\": \"f16\"", "\"dtype\": \"bf16\"");
        },
        // Even a change that means nothing to JSON: the hash is
        // of the bytes.
        +[](std::string &M) { M += " "; }}) {
    auto [Cpu, Device] = backendErrors(copyWithManifest("edited", Edit));
    EXPECT_NE(Cpu.find(Refused), std::string::npos) << Cpu;
    EXPECT_NE(Device.find(Refused), std::string::npos) << Device;
  }
}

TEST(ManifestBindingTest, PTXDeclarationIsParsedStrictly) {
  using kvq::findPTXManifestHash;
  EXPECT_EQ(findPTXManifestHash(kvq::formatPTXManifestHash("c", 42), "c"), 42u);
  EXPECT_EQ(findPTXManifestHash(
                kvq::formatPTXManifestHash("c", UINT64_MAX) + "\n.entry", "c"),
            UINT64_MAX);
  // Another cache's declaration, none, two, a truncated or overflowing one.
  EXPECT_EQ(findPTXManifestHash(kvq::formatPTXManifestHash("d", 42), "c"),
            std::nullopt);
  EXPECT_EQ(findPTXManifestHash(".version 8.0\n", "c"), std::nullopt);
  EXPECT_EQ(findPTXManifestHash(kvq::formatPTXManifestHash("c", 1) +
                                    kvq::formatPTXManifestHash("c", 1),
                                "c"),
            std::nullopt);
  EXPECT_EQ(
      findPTXManifestHash(".global .align 8 .u64 c_manifest_hash = 42", "c"),
      std::nullopt);
  EXPECT_EQ(findPTXManifestHash(".global .align 8 .u64 c_manifest_hash = "
                                "18446744073709551616;",
                                "c"),
            std::nullopt);
}

} // namespace
