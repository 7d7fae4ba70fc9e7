//===- ManifestTest.cpp - Manifest parsing and artifact files -------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//

#include "kvq/ABI/ManifestBinding.h"
#include "kvq/Runtime/Runtime.h"
#include "kvq/Support/HostFeatures.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <elf.h>
#include <sys/stat.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kvq::runtime;
using Json = nlohmann::json;

namespace {

const std::string kInputs = KVQ_RUNTIME_TEST_INPUTS;

std::string readText(const std::string &Path) {
  std::ifstream In(Path);
  std::ostringstream SS;
  SS << In.rdbuf();
  return SS.str();
}

Json mockJson() {
  return Json::parse(readText(kInputs + "/mock/manifest.json"));
}

/// Parses the mock manifest after Edit changed it; returns the error.
template <typename Fn> std::string errorAfter(Fn Edit) {
  Json J = mockJson();
  Edit(J);
  Expected<Manifest> M = parseManifest(J.dump());
  EXPECT_FALSE(M.ok());
  return M.ok() ? std::string() : M.message();
}

TEST(ManifestTest, ParsesTheMockFixture) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(kInputs + "/mock");
  ASSERT_TRUE(A.ok()) << A.message();
  const Manifest &M = (*A)->manifest();
  EXPECT_EQ(M.Version, 15);
  // The template's zeros; the build fills in the mock kernels.so's.
  EXPECT_EQ(M.HostSharedChecksum, 0u);
  EXPECT_EQ(M.Name, "mock_fp16");
  EXPECT_EQ(M.Model.Layers, 2u);
  EXPECT_EQ(M.Model.Heads, 4u);
  EXPECT_EQ(M.Model.KvHeads, 2u);
  EXPECT_EQ(M.Model.HeadDim, 8u);
  EXPECT_EQ(M.Model.Type, DType::F16);
  EXPECT_DOUBLE_EQ(M.Model.Scale, 0.35355339059327373);
  EXPECT_EQ(M.Model.Channels, ChannelOrder::Any);
  EXPECT_EQ(M.PageTokens, 4u);
  EXPECT_EQ(M.SplitTokens, 5u);
  EXPECT_EQ(M.HostSplitTokens, 5u);
  EXPECT_EQ(M.SplitGranule, 5u);
  EXPECT_EQ(M.Keys.Sink, 2u);
  EXPECT_EQ(M.Keys.Recent, 3u);
  EXPECT_EQ(M.Keys.Flush, 2u);
  EXPECT_EQ(M.Keys.WindowCapacity, 4u);
  EXPECT_EQ(M.Values.Flush, 4u);
  ASSERT_EQ(M.Keys.Layers.size(), 2u);
  EXPECT_EQ(M.Keys.Layers[1].Slice.Offset, 128u);
  EXPECT_EQ(M.Keys.Layers[1].Slice.SliceBytes, 64u);
  EXPECT_FALSE(M.Keys.Layers[1].Scheme.Quantized);
  EXPECT_EQ(M.Values.Layers[0].FlushKernel, "kvq_mock_flush_values_0");
  EXPECT_EQ(M.Layers[1].Attend, "kvq_mock_attend_1");
  ASSERT_NE(M.kernel("kvq_mock_attend_0"), nullptr);
  EXPECT_EQ(M.kernel("kvq_mock_attend_0")->Args.size(), 23u);
  EXPECT_EQ(M.Pool.Capacity, 0u);
  EXPECT_FALSE(M.Pool.isTracked(1));
  EXPECT_EQ(M.kernel("nope"), nullptr);
  EXPECT_FALSE(M.hasKeyNorm());
  EXPECT_TRUE((*A)->ptxTargets().empty());
  // The fixture directory has a manifest only.
  EXPECT_FALSE((*A)->hostSharedPath().ok());
}

TEST(ManifestTest, LayersTakeTheirFlushKernelsDeviceUnits) {
  Json J = mockJson();
  for (Json &K : J["kernels"])
    if (K["name"] == "kvq_mock_flush_values_0")
      K["device_units"] = 128;
  Expected<Manifest> M = parseManifest(J.dump());
  ASSERT_TRUE(M.ok()) << M.message();
  EXPECT_EQ(M->Values.Layers[0].FlushDeviceUnits, 128u);
  EXPECT_EQ(M->Values.Layers[1].FlushDeviceUnits, 1u);
  EXPECT_EQ(M->Keys.Layers[0].FlushDeviceUnits, 1u);
}

/// A slice object with the fields kvq/ABI/CacheLayout.h names (the others at
/// their defaults).
Json sliceJson(uint64_t Offset, uint64_t SliceBytes, unsigned WordsPerGroup,
               unsigned GroupsPerToken, unsigned GroupsPerPage,
               unsigned ParamBytes, uint64_t CodesBytes, int64_t ZerosOffset,
               unsigned WordsPerToken = 0, std::vector<int> GroupWords = {}) {
  return {{"offset", Offset},
          {"slice_bytes", SliceBytes},
          {"words_per_group", WordsPerGroup},
          {"groups_per_token", GroupsPerToken},
          {"groups_per_page", GroupsPerPage},
          {"param_bytes", ParamBytes},
          {"codes_bytes", CodesBytes},
          {"scales_offset", CodesBytes},
          {"zeros_offset", ZerosOffset},
          {"codes_from", -1},
          {"codes_layer_delta", 0},
          {"codes_head_delta", 0},
          {"words_per_token", WordsPerToken},
          {"group_words", GroupWords}};
}

TEST(ManifestTest, ParsesAQuantizedScheme) {
  Json J = mockJson();
  Json &Keys = J["tensors"]["keys"];
  Keys["layers"][0]["scheme"] = {
      {"kind", "quant"},    {"bits", 3},       {"mode", "sym"},
      {"span", "channels"}, {"group", 4},      {"levels", 8},
      {"eta", 0.0},         {"clip", 1.0},     {"params", "f16"},
      {"key_norm", true},   {"pre_rope", true}};
  // 4 tokens x 2 groups of 4 3-bit codes: a word each, 32 bytes of codes;
  // 8 f16 scales (16 bytes), no zero-points. Layer 1 follows two such
  // slices.
  Keys["layers"][0]["slice"] = sliceJson(0, 48, 1, 2, 8, 2, 32, -1);
  Keys["layers"][1]["slice"]["offset"] = 96;
  Keys["page_bytes"] = 96 + 2 * 64;
  J["layers"][0]["keynorm_kernel"] = "kvq_mock_keynorm_0";
  J["kernels"].push_back(
      {{"name", "kvq_mock_keynorm_0"},
       {"kind", "keynorm"},
       {"block", {32, 1, 1}},
       {"shared_bytes", 0},
       {"device_units", 1},
       {"args", {"ptr", "ptr", "ptr", "i32", "i32", "i32"}}});
  Expected<Manifest> M = parseManifest(J.dump());
  ASSERT_TRUE(M.ok()) << M.message();
  const SchemeLayout &S = M->Keys.Layers[0].Scheme;
  EXPECT_TRUE(S.Quantized);
  EXPECT_EQ(S.Bits, 3u);
  EXPECT_EQ(S.Mode, "sym");
  EXPECT_FALSE(S.SpanTokens);
  EXPECT_TRUE(S.KeyNorm);
  EXPECT_TRUE(S.PreRope);
  const kvq::abi::SliceLayout &L = M->Keys.Layers[0].Slice;
  EXPECT_EQ(L.ZerosOffset, -1);
  EXPECT_EQ(L.ScalesOffset, 32u);
  EXPECT_EQ(L.SliceBytes, 48u);
  EXPECT_TRUE(M->hasKeyNorm());
  EXPECT_EQ(M->kernel("kvq_mock_keynorm_0")->Block.X, 32u);
}

/// The mock with layer 0's keys quantized with SKVQ's channel reorder and
/// per-group clip factors (head_dim 8, groups of 4, 4-token pages).
Json reorderedMock() {
  Json J = mockJson();
  J["tensors"]["keys"]["layers"][0]["scheme"] = {
      {"kind", "quant"},
      {"bits", 2},
      {"mode", "asym"},
      {"span", "channels"},
      {"group", 4},
      {"levels", 4},
      {"eta", 0.0},
      {"clip", 1.0},
      {"params", "f16"},
      {"key_norm", false},
      {"pre_rope", false},
      {"reorder",
       {{"perm", {{7, 6, 5, 4, 3, 2, 1, 0}, {0, 1, 2, 3, 4, 5, 6, 7}}},
        {"sizes", {{3, 5}, {4, 4}}}}},
      {"clip_table", {{0.5, 1.0}, {0.75, 0.25}}}};
  // Each group of 2-bit codes takes a word: 2 words a token, 32 bytes of
  // codes; 8 f16 scales and 8 zero-points of 16 bytes each.
  J["tensors"]["keys"]["layers"][0]["slice"] =
      sliceJson(0, 64, 0, 2, 8, 2, 32, 48, 2, {0, 1, 0, 1});
  return J;
}

TEST(ManifestTest, ParsesReorderAndClipTables) {
  Expected<Manifest> M = parseManifest(reorderedMock().dump());
  ASSERT_TRUE(M.ok()) << M.message();
  const SchemeLayout &S = M->Keys.Layers[0].Scheme;
  EXPECT_EQ(M->Keys.Layers[0].Slice.WordsPerToken, 2u);
  EXPECT_EQ(S.Perm[0], (std::vector<unsigned>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(S.GroupSizes[0], (std::vector<unsigned>{3, 5}));
  EXPECT_EQ(M->Keys.Layers[0].Slice.GroupWords,
            (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(S.ClipTable[1], (std::vector<double>{0.75, 0.25}));
}

TEST(ManifestTest, RejectsBadReorderAndClipTables) {
  auto after = [](auto Edit) {
    Json J = reorderedMock();
    Edit(J["tensors"]["keys"]["layers"][0]["scheme"],
         J["tensors"]["keys"]["layers"][0]["slice"]);
    Expected<Manifest> M = parseManifest(J.dump());
    EXPECT_FALSE(M.ok());
    return M.ok() ? std::string() : M.message();
  };
  const std::string P = "manifest: 'tensors.keys.layers[0]";
  EXPECT_EQ(after([](Json &S, Json &) { S["reorder"]["perm"][1][7] = 6; }),
            P + ".scheme.reorder.perm' rows must be permutations of the "
                "channels");
  EXPECT_EQ(after([](Json &S, Json &) {
              S["reorder"]["sizes"][0] = {3, 4};
            }),
            P + ".scheme.reorder.sizes' rows must sum to head_dim");
  EXPECT_EQ(after([](Json &S, Json &) {
              S["reorder"]["sizes"][0] = {0, 8};
            }),
            P + ".scheme.reorder' has an empty group");
  EXPECT_EQ(after([](Json &, Json &L) { L["group_words"][1] = 2; }),
            P + ".slice': group_words must lie in [0, words_per_token)");
  EXPECT_EQ(after([](Json &, Json &L) { L["words_per_token"] = 9; }),
            P + ".slice' does not match its scheme: words_per_token is 9, "
                "the schemes give 2");
  EXPECT_EQ(after([](Json &, Json &L) {
              L["group_words"] = {0, 1, 0, 0};
            }),
            P + ".slice' does not match its scheme: group_words differ from "
                "the schemes'");
  EXPECT_EQ(after([](Json &S, Json &) { S["reorder"]["perm"].erase(1); }),
            P + ".scheme.reorder.perm' must have one row per kv-head");
  EXPECT_EQ(after([](Json &S, Json &) { S["clip_table"][0][1] = 1.5; }),
            P + ".scheme.clip_table' factors must be in (0, 1]");
  EXPECT_EQ(after([](Json &S, Json &) { S["clip_table"][0] = {0.5}; }),
            P + ".scheme.clip_table' rows must have 2 entries");
}

TEST(ManifestTest, RequiresTheLayoutOfItsSchemes) {
  auto after = [](auto Edit) {
    Json J = reorderedMock();
    Edit(J["tensors"]["keys"]);
    Expected<Manifest> M = parseManifest(J.dump());
    EXPECT_FALSE(M.ok());
    return M.ok() ? std::string() : M.message();
  };
  const std::string P = "manifest: 'tensors.keys";
  // The rules of any slice, before the schemes are read.
  EXPECT_EQ(
      after([](Json &T) { T["layers"][0]["slice"]["scales_offset"] = 40; }),
      P + ".layers[0].slice': slice offsets and sizes must be multiples "
          "of 16 bytes");
  EXPECT_EQ(
      after([](Json &T) { T["layers"][0]["slice"]["zeros_offset"] = 64; }),
      P + ".layers[0].slice': codes or parameters lie outside the slice");
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["slice"]["codes_from"] = 1; }),
            P + ".layers[0].slice.codes_from' must be -1 or an earlier layer");
  // A slice that obeys them but is not its scheme's.
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["slice"]["codes_bytes"] = 16; }),
            P + ".layers[0].slice' does not match its scheme: codes_bytes is "
                "16, the schemes give 32");
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["scheme"]["mode"] = "sym"; }),
            P + ".layers[0].slice' does not match its scheme: slice_bytes is "
                "64, the schemes give 48");
  // 8-bit codes: kv-head 0's group of 5 takes two words.
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["scheme"]["bits"] = 8; }),
            P + ".layers[0].slice' does not match its scheme: slice_bytes is "
                "64, the schemes give 80");
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["scheme"]["params"] = "f32"; }),
            P + ".layers[0].slice' does not match its scheme: slice_bytes is "
                "64, the schemes give 96");
  EXPECT_EQ(after([](Json &T) { T["layers"][0]["scheme"]["params"] = "f4"; }),
            P + ".layers[0].scheme.params' must be f32, f16, bf16 or f8E4M3FN, "
                "got 'f4'");
  EXPECT_EQ(after([](Json &T) {
              T["layers"][1]["scheme"] = {
                  {"kind", "quant"},   {"bits", 2},        {"mode", "asym"},
                  {"span", "tokens"},  {"group", 3},       {"levels", 4},
                  {"eta", 0.0},        {"clip", 1.0},      {"params", "f16"},
                  {"key_norm", false}, {"pre_rope", false}};
            }),
            P + ".layers[1].scheme.group' must divide page_tokens");
  EXPECT_EQ(after([](Json &T) { T["page_bytes"] = 272; }),
            P + ".page_bytes' is 272, the schemes give 256");
}

TEST(ManifestTest, RejectsAnotherVersion) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(kInputs + "/wrong-version");
  ASSERT_FALSE(A.ok());
  EXPECT_NE(A.message().find("artifact version 12, runtime expects 15"),
            std::string::npos)
      << A.message();
}

TEST(ManifestTest, RejectsMissingDirectoryAndBadJson) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(kInputs + "/does-not-exist");
  ASSERT_FALSE(A.ok());
  EXPECT_NE(A.message().find("cannot open"), std::string::npos) << A.message();
  Expected<Manifest> M = parseManifest("{\"version\": 1,");
  ASSERT_FALSE(M.ok());
  EXPECT_EQ(M.message(), "manifest: not valid JSON");
}

TEST(ManifestTest, RejectsDirectoriesWithNulBytes) {
  // The C library would open the mock artifact, the part before the NUL.
  std::string Dir = kInputs + "/mock" + std::string("\0/../../etc", 11);
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  ASSERT_FALSE(A.ok());
  EXPECT_EQ(A.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(A.message(), "artifact directory contains a NUL byte at offset " +
                             std::to_string(kInputs.size() + 5));
}

TEST(ManifestTest, NamesTheOffendingField) {
  EXPECT_EQ(errorAfter([](Json &J) { J["model"].erase("head_dim"); }),
            "manifest: missing field 'model.head_dim'");
  EXPECT_EQ(errorAfter([](Json &J) { J["page_tokens"] = "four"; }),
            "manifest: 'page_tokens' must be a non-negative integer");
  EXPECT_EQ(errorAfter([](Json &J) { J["model"]["dtype"] = "f8"; }),
            "manifest: 'model.dtype' has unknown dtype 'f8'");
  EXPECT_EQ(errorAfter([](Json &J) { J["model"].erase("channel_order"); }),
            "manifest: missing field 'model.channel_order'");
  EXPECT_EQ(errorAfter([](Json &J) { J["model"]["channel_order"] = "neox"; }),
            "manifest: 'model.channel_order' must be any, half or "
            "interleaved, not 'neox'");
  EXPECT_EQ(
      errorAfter([](Json &J) { J["tensors"]["keys"]["window_capacity"] = 5; }),
      "manifest: 'tensors.keys.window_capacity' must be recent + flush - 1");
  EXPECT_EQ(errorAfter([](Json &J) { J["model"]["heads"] = 3; }),
            "manifest: model.heads must be a multiple of kv_heads");
  EXPECT_EQ(errorAfter([](Json &J) { J["layers"].erase(1); }),
            "manifest: 'layers' must have one entry per model layer");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["layers"][0]["attend_kernel"] = "kvq_mock_flush_keys_0";
            }),
            "manifest: kernel 'kvq_mock_flush_keys_0' referenced as attend "
            "has kind flush");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["values"]["layers"][1]["flush_kernel"] = "gone";
            }),
            "manifest: 'tensors.values.layers[1].flush_kernel' names kernel "
            "'gone' missing from the kernel table");
  EXPECT_EQ(errorAfter([](Json &J) { J["host"].erase("split_tokens"); }),
            "manifest: missing field 'host.split_tokens'");
  EXPECT_EQ(errorAfter([](Json &J) { J["host"]["split_tokens"] = 7; }),
            "manifest: split_granule must divide a positive host.split_tokens");
  EXPECT_EQ(errorAfter([](Json &J) { J["host"]["split_tokens"] = 0; }),
            "manifest: split_granule must divide a positive host.split_tokens");
  EXPECT_EQ(errorAfter([](Json &J) { J["kernels"][0]["device_units"] = 0; }),
            "manifest: 'kernels[0].device_units' must be >= 1");
  EXPECT_EQ(
      errorAfter([](Json &J) { J["kernels"][0]["device_units"] = 1 << 17; }),
      "manifest: 'kernels[0].device_units' is out of range (at most 65536)");
  EXPECT_EQ(errorAfter([](Json &J) { J["kernels"][0]["args"].erase(0); }),
            "manifest: kernel 'kvq_mock_flush_keys_0' has the wrong argument "
            "list for a flush kernel");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["keys"]["layers"][1]["slice"]["offset"] = 240;
            }),
            "manifest: 'tensors.keys.layers[1].slice' does not match its "
            "scheme: offset is 240, the schemes give 128");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["layers"][0]["keynorm_kernel"] = "kvq_mock_attend_0";
            }),
            "manifest: 'layers[0].keynorm_kernel' must be set exactly when the "
            "layer's keys use key_norm");
  // OTT pools: consistent sizes, a track kernel exactly on tracked layers,
  // and one window for keys and values.
  auto Pools = [](Json &J) {
    J["pool"] = {{"capacity", 3},
                 {"extra", 2},
                 {"first_layer", 1},
                 {"entries", 5},
                 {"index_words", 9}};
    J["tensors"]["values"] = J["tensors"]["keys"];
  };
  EXPECT_EQ(errorAfter([&](Json &J) {
              Pools(J);
              J["pool"]["entries"] = 6;
            }),
            "manifest: 'pool' needs entries = capacity + extra and "
            "index_words = entries + 4 (all 0 without pools)");
  EXPECT_EQ(errorAfter(Pools),
            "manifest: 'layers[1].track_kernel' must be set exactly when the "
            "layer has outlier pools");
  EXPECT_EQ(errorAfter([&](Json &J) {
              Pools(J);
              J["layers"][1]["track_kernel"] = "kvq_mock_attend_0";
            }),
            "manifest: kernel 'kvq_mock_attend_0' referenced as track has kind "
            "attend");
  EXPECT_EQ(errorAfter([&](Json &J) {
              Pools(J);
              J["tensors"]["values"]["recent"] = 5;
              J["tensors"]["values"]["window_capacity"] = 6;
              J["kernels"].push_back(
                  {{"name", "kvq_mock_track"},
                   {"kind", "track"},
                   {"block", {32, 1, 1}},
                   {"shared_bytes", 0},
                   {"device_units", 1},
                   {"args",
                    {"ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "i32",
                     "i32", "i32", "i32"}}});
              J["layers"][1]["track_kernel"] = "kvq_mock_track";
            }),
            "manifest: outlier pools need keys and values with the same "
            "window");
}

TEST(ManifestTest, MissingPTXTargetIsAnError) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(kInputs + "/mock");
  ASSERT_TRUE(A.ok()) << A.message();
  Expected<std::string> PTX = (*A)->loadPTX("sm_80");
  ASSERT_FALSE(PTX.ok());
  EXPECT_NE(PTX.message().find("has no PTX for sm_80"), std::string::npos);
}

/// The CPU backend's error for the mock artifact with host features
/// `Features` (kernels.so is never reached: the check comes first).
std::string hostFeatureError(const std::vector<std::string> &Features) {
  Json J = mockJson();
  J["host"]["features"] = Features;
  std::string Dir = ::testing::TempDir() + "kvq-host-features";
  std::filesystem::create_directories(Dir);
  std::ofstream(Dir + "/manifest.json") << J.dump();
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  EXPECT_TRUE(A.ok()) << A.message();
  Expected<std::unique_ptr<Backend>> B = createCpuBackend(**A, 1);
  EXPECT_FALSE(B.ok());
  if (B.ok())
    return "";
  EXPECT_EQ(B.status().code(), ErrorCode::Unsupported);
  return B.message();
}

// Host code compiled for AVX-512 died by SIGILL on machines without it: the
// manifest records the features, and the runtime refuses code it cannot run.
TEST(ManifestTest, HostCodeNeedsItsCPUFeatures) {
  Json J = mockJson();
  EXPECT_EQ(J["host"]["cpu"], "x86-64");
  EXPECT_NE(hostFeatureError({"sse2", "kvq-no-such-feature"})
                .find("needs CPU features kvq cannot check: "
                      "kvq-no-such-feature"),
            std::string::npos);
  std::string Absent;
  for (const char *F : kvq::kHostFeatureNames) {
    bool Known;
    if (!kvq::hostHasFeature(F, Known)) {
      Absent = F;
      break;
    }
  }
  if (Absent.empty())
    GTEST_SKIP() << "this CPU has every feature kvq records";
  std::string Message = hostFeatureError({"sse2", Absent});
  EXPECT_NE(Message.find("needs CPU features this machine lacks: " + Absent),
            std::string::npos)
      << Message;
}

// Hostile manifests (issue: a library named ../evil/evil.so was loaded, a
// PTX path read /etc/passwd, wrapped integers crashed the runtime).
TEST(ManifestTest, RejectsPathsLeavingTheArtifact) {
  EXPECT_EQ(errorAfter(
                [](Json &J) { J["files"]["host_shared"] = "../evil/evil.so"; }),
            "manifest: 'files.host_shared' must be a file name inside the "
            "artifact directory, got '../evil/evil.so'");
  EXPECT_EQ(
      errorAfter([](Json &J) { J["files"]["ptx"]["sm_80"] = "/etc/passwd"; }),
      "manifest: 'files.ptx.sm_80' must be a file name inside the "
      "artifact directory, got '/etc/passwd'");
  EXPECT_NE(errorAfter([](Json &J) {
              J["files"]["host_object"] = "..";
            }).find("must be a file name"),
            std::string::npos);

  // A symbolic link inside the directory that leads out of it.
  namespace fs = std::filesystem;
  std::string Dir = ::testing::TempDir() + "kvq-symlink-escape";
  fs::remove_all(Dir);
  fs::create_directories(Dir);
  Json J = mockJson();
  J["files"]["ptx"]["sm_80"] = "kernels.sm_80.ptx";
  std::ofstream(Dir + "/manifest.json") << J.dump();
  fs::create_symlink("/etc/passwd", Dir + "/kernels.sm_80.ptx");
  fs::create_symlink("/etc/hostname", Dir + "/kernels.so");
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  ASSERT_TRUE(A.ok()) << A.message();
  Expected<std::string> PTX = (*A)->loadPTX("sm_80");
  ASSERT_FALSE(PTX.ok());
  EXPECT_NE(PTX.message().find("leaves the artifact directory"),
            std::string::npos)
      << PTX.message();
  EXPECT_FALSE((*A)->hostSharedPath().ok());

  // A manifest linked to /dev/zero was read without bound; one that is not
  // a regular file (a FIFO here) is refused without reading it.
  std::string Zero = ::testing::TempDir() + "kvq-dev-zero";
  fs::remove_all(Zero);
  fs::create_directories(Zero);
  fs::create_symlink("/dev/zero", Zero + "/manifest.json");
  Expected<std::shared_ptr<const Artifact>> Z = Artifact::open(Zero);
  ASSERT_FALSE(Z.ok());
  EXPECT_NE(Z.message().find("leaves the artifact directory"),
            std::string::npos)
      << Z.message();
  EXPECT_EQ(Z.status().code(), ErrorCode::Artifact);
  fs::remove(Zero + "/manifest.json");
  ASSERT_EQ(mkfifo((Zero + "/manifest.json").c_str(), 0600), 0);
  Z = Artifact::open(Zero);
  ASSERT_FALSE(Z.ok());
  EXPECT_NE(Z.message().find("is not a regular file"), std::string::npos)
      << Z.message();
}

TEST(ManifestTest, TruncatedHostCodeIsAnError) {
  // dlopen of a kernels.so cut short faulted with SIGBUS (found by
  // kvq-fuzz-artifact); the backend now checks the segments first.
  namespace fs = std::filesystem;
  std::string Dir = ::testing::TempDir() + "kvq-truncated-so";
  fs::remove_all(Dir);
  fs::create_directories(Dir);
  std::string Mock = KVQ_MOCK_ARTIFACT_DIR;
  fs::copy_file(Mock + "/manifest.json", Dir + "/manifest.json");
  fs::copy_file(Mock + "/kernels.so", Dir + "/kernels.so");
  for (uintmax_t Size :
       {fs::file_size(Dir + "/kernels.so") / 2, uintmax_t(100), uintmax_t(0)}) {
    fs::resize_file(Dir + "/kernels.so", Size);
    Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
    ASSERT_TRUE(A.ok()) << A.message();
    Expected<std::unique_ptr<Backend>> B = createCpuBackend(**A, 1);
    ASSERT_FALSE(B.ok()) << Size;
    EXPECT_EQ(B.status().code(), ErrorCode::Artifact);
    EXPECT_NE(B.message().find(Size ? "is truncated"
                                    : "is not a 64-bit ELF shared object"),
              std::string::npos)
        << B.message();
  }
}

// A kernels.so with corrupted code was loaded and killed the process
// (SIGILL in its initializers). The manifest records its FNV-1a, checked
// before dlopen.
TEST(ManifestTest, CorruptedHostCodeIsRefusedBeforeLoading) {
  namespace fs = std::filesystem;
  std::string Dir = ::testing::TempDir() + "kvq-corrupt-so";
  fs::remove_all(Dir);
  fs::create_directories(Dir);
  std::string Mock = KVQ_MOCK_ARTIFACT_DIR;
  fs::copy_file(Mock + "/manifest.json", Dir + "/manifest.json");
  std::string Code = readText(Mock + "/kernels.so");
  // Every byte of the executable segments becomes ud2's (0f 0b).
  Elf64_Ehdr Header;
  ASSERT_GE(Code.size(), sizeof Header);
  std::memcpy(&Header, Code.data(), sizeof Header);
  unsigned Executable = 0;
  for (unsigned I = 0; I < Header.e_phnum; ++I) {
    Elf64_Phdr P;
    std::memcpy(&P, Code.data() + Header.e_phoff + I * sizeof P, sizeof P);
    if (P.p_type != PT_LOAD || !(P.p_flags & PF_X))
      continue;
    ++Executable;
    for (uint64_t At = P.p_offset; At + 1 < P.p_offset + P.p_filesz; At += 2) {
      Code[At] = '\x0f';
      Code[At + 1] = '\x0b';
    }
  }
  ASSERT_GT(Executable, 0u);
  std::ofstream(Dir + "/kernels.so", std::ios::binary) << Code;
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  ASSERT_TRUE(A.ok()) << A.message();
  Expected<std::unique_ptr<Backend>> B = createCpuBackend(**A, 1);
  ASSERT_FALSE(B.ok());
  EXPECT_EQ(B.status().code(), ErrorCode::Artifact);
  EXPECT_NE(B.message().find("kernels.so is corrupt: its FNV-1a "),
            std::string::npos)
      << B.message();
  EXPECT_NE(B.message().find(" manifest.json records (recompile the spec)"),
            std::string::npos)
      << B.message();
  // One flipped byte anywhere, too.
  Code = readText(Mock + "/kernels.so");
  Code[Code.size() / 3] ^= 1;
  std::ofstream(Dir + "/kernels.so", std::ios::binary | std::ios::trunc)
      << Code;
  B = createCpuBackend(**A, 1);
  ASSERT_FALSE(B.ok());
  EXPECT_NE(B.message().find("is corrupt"), std::string::npos) << B.message();
  // The intact file loads.
  fs::copy_file(Mock + "/kernels.so", Dir + "/kernels.so",
                fs::copy_options::overwrite_existing);
  B = createCpuBackend(**A, 1);
  EXPECT_TRUE(B.ok()) << B.message();
}

TEST(ManifestTest, HostSharedChecksumIsSixteenHexDigits) {
  for (const char *Bad : {"", "0", "00000000000000000", "000000000000000G",
                          "ABCDEF0000000000", " 000000000000000"})
    EXPECT_EQ(
        errorAfter([&](Json &J) { J["files"]["host_shared_fnv1a"] = Bad; }),
        "manifest: 'files.host_shared_fnv1a' must be 16 lowercase "
        "hexadecimal digits")
        << Bad;
  EXPECT_EQ(errorAfter([](Json &J) { J["files"]["host_shared_fnv1a"] = 7; }),
            "manifest: 'files.host_shared_fnv1a' must be a string");
  EXPECT_EQ(errorAfter([](Json &J) { J["files"].erase("host_shared_fnv1a"); }),
            "manifest: missing field 'files.host_shared_fnv1a'");
}

// The manifest hash reads the checksum's digits as zeros, so that kernels
// built around it can be checksummed into it.
TEST(ManifestTest, ManifestHashSkipsTheChecksumDigits) {
  std::string A = "{\"host_shared_fnv1a\": \"0123456789abcdef\"}";
  std::string B = "{\"host_shared_fnv1a\": \"0000000000000000\"}";
  EXPECT_EQ(kvq::hashManifest(A), kvq::hashManifest(B));
  EXPECT_EQ(kvq::hashManifest(B), kvq::fnv1a64(B));
  EXPECT_NE(kvq::hashManifest(A), kvq::fnv1a64(A));
  // Everything else counts.
  std::string C = "{\"host_shared_fnv1a\": \"0000000000000000\" }";
  EXPECT_NE(kvq::hashManifest(C), kvq::hashManifest(B));
  EXPECT_EQ(kvq::formatHostSharedChecksum(0x0123456789abcdefull),
            "0123456789abcdef");
  EXPECT_EQ(kvq::parseHostSharedChecksum("0123456789abcdef"),
            0x0123456789abcdefull);
}

TEST(ManifestTest, RejectsIntegersThatWouldWrap) {
  EXPECT_EQ(errorAfter([](Json &J) { J["version"] = 4294967297ull; }),
            "artifact version 4294967297, runtime expects 15");
  EXPECT_EQ(errorAfter([](Json &J) { J["version"] = 18446744073709551615ull; }),
            "manifest: 'version' is out of range");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["keys"]["page_bytes"] = 9223372036854775807ull;
            }),
            "manifest: 'tensors.keys.page_bytes' is out of range (at most "
            "1099511627776)");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["keys"]["layers"][0]["slice"]["offset"] =
                  9223372036854775806ull;
            }),
            "manifest: 'tensors.keys.layers[0].slice.offset' is out of range "
            "(at most 1099511627776)");
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["keys"]["layers"][0]["slice"]["codes_head_delta"] =
                  -9223372036854775807ll;
            }),
            "manifest: 'tensors.keys.layers[0].slice.codes_head_delta' is out "
            "of range");
  // recent + flush - 1 wrapped to 0 in 32 bits.
  EXPECT_EQ(errorAfter([](Json &J) {
              J["tensors"]["values"]["recent"] = 4294967295u;
              J["tensors"]["values"]["flush"] = 2;
              J["tensors"]["values"]["window_capacity"] = 0;
            }),
            "manifest: 'tensors.values.recent' is out of range (at most "
            "1048576)");
  EXPECT_EQ(errorAfter([](Json &J) { J["model"]["head_dim"] = 1u << 20; }),
            "manifest: 'model.head_dim' is out of range (at most 16384)");
}

/// The PTX a device backend loads from an artifact with PTX for several
/// chips: the newest target the device runs, the oldest on the interpreter
/// (no SM), a named one if the device runs it.
TEST(PtxTargetTest, NewestTheDeviceLoads) {
  namespace fs = std::filesystem;
  std::string Dir = ::testing::TempDir() + "kvq-ptx-targets";
  fs::remove_all(Dir);
  fs::create_directories(Dir);
  Json J = mockJson();
  J["files"]["ptx"] = {{"sm_80", "kernels.sm_80.ptx"},
                       {"sm_90", "kernels.sm_90.ptx"}};
  std::ofstream(Dir + "/manifest.json") << J.dump();
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  ASSERT_TRUE(A.ok()) << A.message();
  ASSERT_EQ((*A)->ptxTargets(), (std::vector<std::string>{"sm_80", "sm_90"}));
  auto Pick = [&](unsigned Sm, const std::string &Target = "") {
    Expected<std::string> T = choosePtxTarget(**A, Sm, Target);
    return T.ok() ? *T : "error: " + T.message();
  };
  EXPECT_EQ(Pick(90), "sm_90");
  EXPECT_EQ(Pick(120), "sm_90");
  EXPECT_EQ(Pick(89), "sm_80");
  EXPECT_EQ(Pick(0), "sm_80");
  EXPECT_EQ(Pick(0, "sm_90"), "sm_90");
  EXPECT_EQ(Pick(90, "sm_80"), "sm_80");
  EXPECT_EQ(Pick(86, "sm_90"),
            "error: PTX target sm_90 is newer than the device (sm_86)");
  Expected<std::string> Old = choosePtxTarget(**A, 75);
  ASSERT_FALSE(Old.ok());
  EXPECT_EQ(Old.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(Old.message().find("has PTX for sm_80, sm_90, none of which the "
                               "device (sm_75) loads"),
            std::string::npos)
      << Old.message();
}

} // namespace
