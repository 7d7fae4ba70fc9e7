//===- CApiTest.cpp - The C API -------------------------------------------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//

#include "kvq/kvq.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

const std::string kMockDir = KVQ_MOCK_ARTIFACT_DIR;
const std::string kInputs = KVQ_RUNTIME_TEST_INPUTS;

template <typename T> size_t bytes(const std::vector<T> &V) {
  return V.size() * sizeof(T);
}

/// Opens the mock artifact and a CPU cache of one sequence on it.
struct MockCache {
  kvq_artifact *A = nullptr;
  kvq_cache *C = nullptr;
  kvq_sequence S = 0;
  uint32_t Heads = 0, KvHeads = 0, HeadDim = 0;
  MockCache() {
    EXPECT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK);
    EXPECT_EQ(
        kvq_artifact_shape(A, nullptr, &Heads, &KvHeads, &HeadDim, nullptr),
        KVQ_OK);
    EXPECT_EQ(kvq_cache_create(A, nullptr, &C), KVQ_OK) << kvq_last_error();
    EXPECT_EQ(kvq_cache_add_sequence(C, &S), KVQ_OK);
  }
  ~MockCache() {
    kvq_cache_destroy(C);
    kvq_artifact_close(A);
  }
  uint64_t cachedElements() {
    kvq_memory_stats Stats;
    EXPECT_EQ(kvq_cache_memory_stats(C, &Stats), KVQ_OK);
    return Stats.cached_elements;
  }
};

TEST(CApiTest, AppendAttendAndStats) {
  kvq_artifact *A = nullptr;
  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK)
      << kvq_last_error();
  uint32_t Layers, Heads, KvHeads, HeadDim, DTypeBytes;
  ASSERT_EQ(
      kvq_artifact_shape(A, &Layers, &Heads, &KvHeads, &HeadDim, &DTypeBytes),
      KVQ_OK);
  EXPECT_EQ(Layers, 2u);
  EXPECT_EQ(Heads, 4u);
  EXPECT_EQ(DTypeBytes, 2u);

  kvq_cache_options O;
  kvq_cache_options_init(&O);
  EXPECT_EQ(O.max_sequences, 8u);
  O.max_sequences = 1;
  O.pages_per_tensor = 4;
  kvq_cache *C = nullptr;
  ASSERT_EQ(kvq_cache_create(A, &O, &C), KVQ_OK) << kvq_last_error();
  kvq_artifact_close(A); // the cache keeps it alive

  kvq_sequence S, T;
  ASSERT_EQ(kvq_cache_add_sequence(C, &S), KVQ_OK);
  EXPECT_EQ(kvq_cache_add_sequence(C, &T), KVQ_ERROR_CAPACITY);
  EXPECT_STREQ(kvq_last_error(), "cache full: all 1 sequence slots are in use");

  // One token of constant keys and values: attention returns the value.
  std::vector<float> K(KvHeads * HeadDim, 0.5f), V(KvHeads * HeadDim, 2.0f);
  kvq_append_item Item = {S, 1, K.data(), V.data(), bytes(K), bytes(V)};
  ASSERT_EQ(kvq_cache_append_f32(C, 0, &Item, 1), KVQ_OK) << kvq_last_error();
  std::vector<float> Q(Heads * HeadDim, 1.0f), Out(Heads * HeadDim);
  ASSERT_EQ(kvq_cache_attend_f32(C, 0, &S, 1, Q.data(), bytes(Q), Out.data(),
                                 bytes(Out)),
            KVQ_OK);
  for (float X : Out)
    EXPECT_FLOAT_EQ(X, 2.0f);

  kvq_memory_stats Stats;
  ASSERT_EQ(kvq_cache_memory_stats(C, &Stats), KVQ_OK);
  EXPECT_EQ(Stats.cached_elements, 2u * KvHeads * HeadDim);
  EXPECT_EQ(Stats.bytes_used, 2u * KvHeads * HeadDim * 2);
  EXPECT_DOUBLE_EQ(Stats.bits_per_element, 16.0);

  // Errors: codes and messages, nothing changed.
  K[3] = INFINITY;
  EXPECT_EQ(kvq_cache_append_f32(C, 0, &Item, 1), KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kvq_last_error()).find("non-finite key"), 0u);
  std::vector<float> Zeros(100 * KvHeads * HeadDim, 0.0f);
  kvq_append_item Many = {
      S, 100, Zeros.data(), Zeros.data(), bytes(Zeros), bytes(Zeros)};
  EXPECT_EQ(kvq_cache_append_f32(C, 1, &Many, 1), KVQ_ERROR_CAPACITY)
      << kvq_last_error();
  EXPECT_EQ(kvq_cache_remove_sequence(C, S + 7), KVQ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(kvq_cache_memory_stats(C, &Stats), KVQ_OK);
  EXPECT_EQ(Stats.cached_elements, 2u * KvHeads * HeadDim);
  EXPECT_EQ(kvq_cache_remove_sequence(C, S), KVQ_OK);
  kvq_cache_destroy(C);
}

TEST(CApiTest, ArtifactErrors) {
  kvq_artifact *A = nullptr;
  EXPECT_EQ(kvq_artifact_open((kInputs + "/wrong-version").c_str(), &A),
            KVQ_ERROR_ARTIFACT);
  EXPECT_NE(std::string(kvq_last_error())
                .find("artifact version 12, runtime expects 15"),
            std::string::npos);
  EXPECT_EQ(A, nullptr);
  EXPECT_EQ(kvq_artifact_open(nullptr, &A), KVQ_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK);
  kvq_cache_options O;
  kvq_cache_options_init(&O);
  O.backend = KVQ_BACKEND_CUDA;
  kvq_cache *C = nullptr;
  kvq_status S = kvq_cache_create(A, &O, &C);
  if (S == KVQ_OK) {
    kvq_cache_destroy(C);
  } else {
    std::string Msg = kvq_last_error();
    // No driver here; with one, the mock's missing PTX is the error.
    EXPECT_TRUE(Msg.rfind("no CUDA driver", 0) == 0 ||
                Msg.find("has PTX for no target") != std::string::npos)
        << Msg;
    EXPECT_TRUE(S == KVQ_ERROR_BACKEND || S == KVQ_ERROR_UNSUPPORTED) << Msg;
  }
  kvq_artifact_close(A);
}

TEST(CApiTest, BufferSizesAreChecked) {
  MockCache M;
  // A token count larger than the buffers read past them (findNonFinite).
  std::vector<float> K(M.KvHeads * M.HeadDim, 1.0f), V = K;
  kvq_append_item Item = {M.S, 1000, K.data(), V.data(), bytes(K), bytes(V)};
  EXPECT_EQ(kvq_cache_append_f32(M.C, 0, &Item, 1), KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("1000 tokens need"),
            std::string::npos)
      << kvq_last_error();
  Item.num_tokens = 1;
  Item.v_bytes = 0;
  EXPECT_EQ(kvq_cache_append_f32(M.C, 0, &Item, 1), KVQ_ERROR_INVALID_ARGUMENT);
  // Raw model-dtype items count bytes of f16, not floats.
  std::vector<uint16_t> KHalf(K.size(), 0x3c00), VHalf = KHalf;
  kvq_append_item Raw = {M.S,          1,       KHalf.data(), VHalf.data(),
                         bytes(KHalf), bytes(K)};
  EXPECT_EQ(kvq_cache_append(M.C, 0, &Raw, 1), KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(M.cachedElements(), 0u);
  Raw.v_bytes = bytes(VHalf);
  EXPECT_EQ(kvq_cache_append(M.C, 0, &Raw, 1), KVQ_OK) << kvq_last_error();

  std::vector<float> Q(M.Heads * M.HeadDim, 1.0f), Out(Q.size());
  EXPECT_EQ(kvq_cache_attend_f32(M.C, 0, &M.S, 1, Q.data(), bytes(Q) - 4,
                                 Out.data(), bytes(Out)),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_cache_attend_f32(M.C, 0, &M.S, 1, Q.data(), bytes(Q),
                                 Out.data(), bytes(Out) / 2),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_cache_attend_f32(M.C, 0, &M.S, 1, Q.data(), bytes(Q),
                                 Out.data(), bytes(Out)),
            KVQ_OK)
      << kvq_last_error();
}

/// Several queries of one sequence in one call, each over its causal
/// prefix: with equal keys, query j's output is the mean of the first
/// tokens' values. Sizes count every query's row.
TEST(CApiTest, AttendQueries) {
  MockCache M;
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  std::vector<float> K(3 * Row, 0.5f), V(3 * Row);
  for (size_t I = 0; I < V.size(); ++I)
    V[I] = float(2 * (I / Row + 1)); // tokens' values 2, 4, 6
  kvq_append_item Item = {M.S, 3, K.data(), V.data(), bytes(K), bytes(V)};
  ASSERT_EQ(kvq_cache_append_f32(M.C, 0, &Item, 1), KVQ_OK) << kvq_last_error();
  uint32_t Queries = 3;
  std::vector<float> Q(3 * M.Heads * M.HeadDim, 1.0f), Out(Q.size());
  ASSERT_EQ(kvq_cache_attend_queries_f32(M.C, 0, &M.S, 1, &Queries, Q.data(),
                                         bytes(Q), Out.data(), bytes(Out),
                                         KVQ_QUERY_ROTATED),
            KVQ_OK)
      << kvq_last_error();
  size_t QRow = size_t(M.Heads) * M.HeadDim;
  for (size_t I = 0; I < Out.size(); ++I)
    ASSERT_FLOAT_EQ(Out[I], float(I / QRow + 2)) << I; // 2, 3, 4
  // Two rows' worth of query for three queries.
  EXPECT_EQ(kvq_cache_attend_queries_f32(M.C, 0, &M.S, 1, &Queries, Q.data(),
                                         bytes(Q) / 3 * 2, Out.data(),
                                         bytes(Out), KVQ_QUERY_ROTATED),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("attend of 3 queries needs"),
            std::string::npos)
      << kvq_last_error();
  Queries = 4;
  std::vector<uint16_t> QHalf(4 * QRow, 0x3c00);
  std::vector<float> Out4(QHalf.size());
  EXPECT_EQ(kvq_cache_attend_queries(M.C, 0, &M.S, 1, &Queries, QHalf.data(),
                                     bytes(QHalf), Out4.data(), bytes(Out4),
                                     KVQ_QUERY_ROTATED),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("has 4 queries and 3 tokens"),
            std::string::npos)
      << kvq_last_error();
  EXPECT_EQ(kvq_cache_attend_queries(M.C, 0, &M.S, 1, nullptr, QHalf.data(),
                                     bytes(QHalf), Out4.data(), bytes(Out4),
                                     KVQ_QUERY_ROTATED),
            KVQ_ERROR_INVALID_ARGUMENT);
}

/// The query's rotation: rotated (the default) works on every layer, an
/// unrotated query needs pre-RoPE keys (the mock has none) and an unknown
/// kvq_query_rope is an error; a rejected attend changes nothing.
TEST(CApiTest, QueryRopeIsChecked) {
  MockCache M;
  std::vector<uint16_t> K(M.KvHeads * M.HeadDim, 0x3c00), V = K;
  kvq_append_item Item = {M.S, 1, K.data(), V.data(), bytes(K), bytes(V)};
  ASSERT_EQ(kvq_cache_append(M.C, 0, &Item, 1), KVQ_OK) << kvq_last_error();
  size_t Cached = M.cachedElements();
  std::vector<float> Q(M.Heads * M.HeadDim, 1.0f), Out(Q.size());
  EXPECT_EQ(kvq_cache_attend_f32_rope(M.C, 0, &M.S, 1, Q.data(), bytes(Q),
                                      Out.data(), bytes(Out),
                                      KVQ_QUERY_ROTATED),
            KVQ_OK)
      << kvq_last_error();
  EXPECT_EQ(kvq_cache_attend_f32_rope(M.C, 0, &M.S, 1, Q.data(), bytes(Q),
                                      Out.data(), bytes(Out),
                                      KVQ_QUERY_UNROTATED),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error())
                .find("an unrotated query needs pre-RoPE keys"),
            std::string::npos)
      << kvq_last_error();
  std::vector<uint16_t> QHalf(Q.size(), 0x3c00);
  EXPECT_EQ(kvq_cache_attend_rope(M.C, 0, &M.S, 1, QHalf.data(), bytes(QHalf),
                                  Out.data(), bytes(Out), kvq_query_rope(7)),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("unknown kvq_query_rope 7"),
            std::string::npos)
      << kvq_last_error();
  EXPECT_EQ(M.cachedElements(), Cached);
}

TEST(CApiTest, OptionsAreValidated) {
  kvq_artifact *A = nullptr;
  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK);
  kvq_cache_options O;
  kvq_cache_options_init(&O);
  kvq_cache *C = nullptr;
  // An out-of-range enum value ran on the CPU (UBSan: invalid enum load).
  // As a C caller would store it: written as an int, never loaded as the
  // enum here.
  int Seven = 7;
  std::memcpy(&O.backend, &Seven, sizeof Seven);
  EXPECT_EQ(kvq_cache_create(A, &O, &C), KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("unknown backend 7"),
            std::string::npos);
  // 2^32 - 1 threads threw std::system_error through the C API.
  kvq_cache_options_init(&O);
  O.threads = 4294967295u;
  EXPECT_EQ(kvq_cache_create(A, &O, &C), KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("at most 1024 threads"),
            std::string::npos);
  EXPECT_EQ(C, nullptr);
  kvq_artifact_close(A);
}

TEST(CApiTest, DTypeIsDistinct) {
  MockCache M;
  kvq_dtype DType;
  ASSERT_EQ(kvq_artifact_dtype(M.A, &DType), KVQ_OK);
  EXPECT_EQ(DType, KVQ_DTYPE_F16);
  EXPECT_EQ(kvq_artifact_dtype(M.A, nullptr), KVQ_ERROR_INVALID_ARGUMENT);
}

TEST(CApiTest, ChannelOrderIsTheManifests) {
  MockCache M;
  kvq_channel_order Order = KVQ_CHANNEL_ORDER_HALF;
  ASSERT_EQ(kvq_artifact_channel_order(M.A, &Order), KVQ_OK);
  EXPECT_EQ(Order, KVQ_CHANNEL_ORDER_ANY);
  EXPECT_EQ(kvq_artifact_channel_order(M.A, nullptr),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_artifact_channel_order(nullptr, &Order),
            KVQ_ERROR_INVALID_ARGUMENT);
}

TEST(CApiTest, ErrorCodesAreSetWhereTheErrorIsMade) {
  MockCache M;
  // Each failure's code is the kind of failure, whatever its message says.
  size_t Restored = 0;
  kvq_sequence Ids[8];
  EXPECT_EQ(
      kvq_cache_restore(M.C, "/nonexistent/dir/cache.kvqc", Ids, 8, &Restored),
      KVQ_ERROR_FILE);
  std::string FileMessage = kvq_last_error();
  EXPECT_FALSE(FileMessage.empty());
  EXPECT_NE(FileMessage.find("/nonexistent/dir/cache.kvqc"), std::string::npos)
      << FileMessage;
  // A later failure replaces the message; a success leaves it.
  EXPECT_EQ(kvq_cache_remove_sequence(M.C, M.S + 99),
            KVQ_ERROR_INVALID_ARGUMENT);
  std::string SeqMessage = kvq_last_error();
  EXPECT_NE(SeqMessage, FileMessage);
  kvq_memory_stats Stats;
  EXPECT_EQ(kvq_cache_memory_stats(M.C, &Stats), KVQ_OK);
  EXPECT_EQ(SeqMessage, kvq_last_error());

  EXPECT_STREQ(kvq_status_name(KVQ_OK), "KVQ_OK");
  EXPECT_STREQ(kvq_status_name(KVQ_ERROR_FILE), "KVQ_ERROR_FILE");
  EXPECT_STREQ(kvq_status_name(KVQ_ERROR_OUT_OF_MEMORY),
               "KVQ_ERROR_OUT_OF_MEMORY");
  kvq_status Bad;
  int Eight = 8;
  std::memcpy(&Bad, &Eight, sizeof Bad);
  EXPECT_STREQ(kvq_status_name(Bad), "unknown status");
}

/// The address of host memory as the CPU backend's device memory.
template <typename T> kvq_device_ptr devicePtr(std::vector<T> &V) {
  return kvq_device_ptr(reinterpret_cast<uintptr_t>(V.data()));
}

TEST(CApiTest, DeviceCallsAndPlansMatchHostCalls) {
  MockCache Host, Dev;
  size_t Row = Host.KvHeads * Host.HeadDim, QRow = Host.Heads * Host.HeadDim;
  // 9 tokens of f16 keys and values (1.0 + small steps), a query of 0.5.
  std::vector<uint16_t> K(9 * Row), V(9 * Row), Q(QRow, 0x3800);
  for (size_t I = 0; I < K.size(); ++I) {
    K[I] = uint16_t(0x3c00 + I % 97);
    V[I] = uint16_t(0x4000 + I % 89);
  }
  kvq_append_item Item = {Host.S, 9, K.data(), V.data(), bytes(K), bytes(V)};
  ASSERT_EQ(kvq_cache_append(Host.C, 0, &Item, 1), KVQ_OK) << kvq_last_error();
  kvq_traffic Before, After;
  ASSERT_EQ(kvq_cache_traffic(Dev.C, &Before), KVQ_OK);
  kvq_device_append_item DevItem = {Dev.S, 9, devicePtr(K), devicePtr(V)};
  ASSERT_EQ(kvq_cache_append_device(Dev.C, 0, &DevItem, 1, nullptr), KVQ_OK)
      << kvq_last_error();

  std::vector<float> Want(QRow), Out(QRow, -1.0f), Planned(QRow, -1.0f);
  ASSERT_EQ(kvq_cache_attend(Host.C, 0, &Host.S, 1, Q.data(), bytes(Q),
                             Want.data(), bytes(Want)),
            KVQ_OK);
  ASSERT_EQ(kvq_cache_attend_device(Dev.C, 0, &Dev.S, 1, devicePtr(Q),
                                    devicePtr(Out), nullptr),
            KVQ_OK)
      << kvq_last_error();
  // The device calls read nothing back and waited for nothing.
  ASSERT_EQ(kvq_cache_traffic(Dev.C, &After), KVQ_OK);
  EXPECT_EQ(After.bytes_to_host, Before.bytes_to_host);
  EXPECT_EQ(After.synchronizations, Before.synchronizations);
  EXPECT_GT(After.launches, Before.launches);
  ASSERT_EQ(kvq_cache_synchronize(Dev.C, nullptr), KVQ_OK);
  ASSERT_EQ(kvq_cache_traffic(Dev.C, &After), KVQ_OK);
  EXPECT_EQ(After.synchronizations, Before.synchronizations + 1);
  EXPECT_EQ(Out, Want);

  kvq_attend_plan *Plan = nullptr;
  ASSERT_EQ(kvq_cache_plan_attend(Dev.C, &Dev.S, 1, 20, 0, &Plan), KVQ_OK);
  EXPECT_EQ(kvq_cache_attend_planned(Dev.C, 0, Plan, Q.data(), bytes(Q) - 2,
                                     Planned.data(), bytes(Planned)),
            KVQ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(kvq_cache_attend_planned(Dev.C, 0, Plan, Q.data(), bytes(Q),
                                     Planned.data(), bytes(Planned)),
            KVQ_OK)
      << kvq_last_error();
  EXPECT_EQ(Planned, Want);
  std::fill(Planned.begin(), Planned.end(), -1.0f);
  ASSERT_EQ(kvq_cache_attend_planned_device(Dev.C, 0, Plan, devicePtr(Q),
                                            devicePtr(Planned), nullptr),
            KVQ_OK);
  EXPECT_EQ(Planned, Want);
  kvq_attend_plan_destroy(Plan);
  kvq_sequence Unknown = Dev.S + 5;
  EXPECT_EQ(kvq_cache_plan_attend(Dev.C, &Unknown, 1, 0, 0, &Plan),
            KVQ_ERROR_INVALID_ARGUMENT);
}

TEST(CApiTest, EnginePagesThroughBlockTables) {
  kvq_artifact *A = nullptr;
  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &A), KVQ_OK);
  uint64_t PageBytes = 0;
  uint32_t PageTokens = 0;
  ASSERT_EQ(
      kvq_artifact_page_bytes(A, KVQ_TENSOR_VALUES, &PageBytes, &PageTokens),
      KVQ_OK);
  EXPECT_EQ(PageBytes, 256u);
  EXPECT_EQ(PageTokens, 4u);
  kvq_tensor Bad;
  int Five = 5;
  std::memcpy(&Bad, &Five, sizeof Bad);
  EXPECT_EQ(kvq_artifact_page_bytes(A, Bad, &PageBytes, nullptr),
            KVQ_ERROR_INVALID_ARGUMENT);

  kvq_cache_options O;
  kvq_cache_options_init(&O);
  EXPECT_EQ(O.page_allocator, KVQ_PAGES_CACHE);
  int Nine = 9;
  std::memcpy(&O.page_allocator, &Nine, sizeof Nine);
  kvq_cache *C = nullptr;
  EXPECT_EQ(kvq_cache_create(A, &O, &C), KVQ_ERROR_INVALID_ARGUMENT);
  O.page_allocator = KVQ_PAGES_ENGINE;
  ASSERT_EQ(kvq_cache_create(A, &O, &C), KVQ_OK) << kvq_last_error();
  kvq_sequence S;
  ASSERT_EQ(kvq_cache_add_sequence(C, &S), KVQ_OK);

  uint32_t Heads, KvHeads, HeadDim;
  ASSERT_EQ(kvq_artifact_shape(A, nullptr, &Heads, &KvHeads, &HeadDim, nullptr),
            KVQ_OK);
  std::vector<float> K(9 * KvHeads * HeadDim, 0.25f);
  kvq_append_item Item = {S, 9, K.data(), K.data(), bytes(K), bytes(K)};
  // No pages assigned yet: the flush has nowhere to go.
  EXPECT_EQ(kvq_cache_append_f32(C, 0, &Item, 1), KVQ_ERROR_CAPACITY);
  const uint32_t Indptr[] = {0, 2}, Indices[] = {5, 1};
  EXPECT_EQ(kvq_cache_set_block_tables(C, Bad, &S, 1, Indptr, Indices),
            KVQ_ERROR_INVALID_ARGUMENT);
  for (kvq_tensor T : {KVQ_TENSOR_KEYS, KVQ_TENSOR_VALUES})
    ASSERT_EQ(kvq_cache_set_block_tables(C, T, &S, 1, Indptr, Indices), KVQ_OK)
        << kvq_last_error();
  EXPECT_EQ(kvq_cache_append_f32(C, 0, &Item, 1), KVQ_OK) << kvq_last_error();
  kvq_sequence Fork;
  EXPECT_EQ(kvq_cache_fork_sequence(C, S, &Fork), KVQ_ERROR_UNSUPPORTED);
  kvq_cache_destroy(C);
  kvq_artifact_close(A);
}

} // namespace
