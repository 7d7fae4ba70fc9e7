//===- ForkRestoreTest.cpp - Fork, save and restore on the mock artifact --===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// Forks share pages copy-on-write: a fork must read as its source, diverge
// from it without changing it, and give every page back once both are gone.
// A saved file must restore bit-exactly; a truncated, corrupt or foreign
// file must be rejected with a clear error and change nothing.
//
//===----------------------------------------------------------------------===//

#include "MockCache.h"

#include "kvq/ABI/ManifestBinding.h"
#include "kvq/kvq.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace kvq::runtime;
using namespace kvq::runtime::mock;

namespace {

/// Appends N random tokens to both layers of Seq and to its models.
void grow(Cache &C, SequenceId Seq, SliceModel (&M)[2], unsigned N,
          std::mt19937 &Rng) {
  for (unsigned L = 0; L < 2; ++L) {
    std::vector<uint16_t> K = randomTokens(Rng, N), V = randomTokens(Rng, N);
    ASSERT_TRUE(C.append(L, {{Seq, N, K.data(), V.data()}}).ok());
    M[L].K.append(K.data(), N);
    M[L].V.append(V.data(), N);
  }
}

/// Checks every region of both layers of Seq, and its attention, against M.
void check(Cache &C, SequenceId Seq, const SliceModel (&M)[2],
           std::mt19937 &Rng) {
  for (unsigned L = 0; L < 2; ++L) {
    checkSide(C, Seq, L, Tensor::Keys, M[L].K);
    checkSide(C, Seq, L, Tensor::Values, M[L].V);
    checkAttention(C, L, {Seq}, {&M[L]}, Rng);
  }
}

/// The counts and bytes of one sequence alone (without the cache-wide
/// numbers snapshot() starts with).
Snapshot contents(Cache &C, SequenceId Seq) {
  Snapshot S = snapshot(C, {Seq});
  S.Numbers.erase(S.Numbers.begin(), S.Numbers.begin() + 5);
  return S;
}

/// Attention outputs of Seqs on Layer, the same fixed query for each.
std::vector<float> attention(Cache &C, unsigned Layer,
                             const std::vector<SequenceId> &Seqs) {
  std::vector<uint16_t> Q(Seqs.size() * kHq * kD);
  for (size_t I = 0; I < Q.size(); ++I)
    Q[I] = kvq::ref::toF16Bits(float(I % (kHq * kD) % 7) / 4.0f - 0.7f);
  std::vector<float> Out(Q.size());
  EXPECT_TRUE(C.attend(Layer, Seqs, Q.data(), Out.data()).ok());
  return Out;
}

/// A cache of Pages pages per tensor and Seqs slots whose sequence A holds
/// Tokens random tokens in both layers, described by M.
struct Prefilled {
  Prefilled(unsigned Pages, unsigned Seqs, unsigned Tokens, unsigned Seed)
      : C(makeCache(Pages, Seqs)), Rng(Seed) {
    A = *C->addSequence();
    grow(*C, A, M, Tokens, Rng);
  }
  std::unique_ptr<Cache> C;
  std::mt19937 Rng;
  SequenceId A = 0;
  SliceModel M[2];
};

//===----------------------------------------------------------------------===//
// Fork
//===----------------------------------------------------------------------===//

TEST(ForkTest, ForkReadsAsItsSourceAndSharesItsPages) {
  // 23 tokens: keys 2 sink, 18 quantized (5 pages, the last half full).
  Prefilled P(16, 4, 23, 11);
  auto &[C, Rng, A, M] = P;
  unsigned FreeKeys = C->freePages(Tensor::Keys);
  Expected<SequenceId> F = C->forkSequence(A);
  ASSERT_TRUE(F.ok()) << F.message();
  EXPECT_EQ(C->freePages(Tensor::Keys), FreeKeys);
  EXPECT_EQ(*C->numPages(Tensor::Keys, *F), 5u);
  EXPECT_TRUE(contents(*C, *F) == contents(*C, A));
  check(*C, *F, M, Rng);
  // Both in one batch: the same outputs, bit for bit.
  std::vector<float> Both = attention(*C, 1, {A, *F});
  EXPECT_TRUE(std::equal(Both.begin(), Both.begin() + kHq * kD,
                         Both.begin() + kHq * kD));
}

TEST(ForkTest, ForksDivergeWithoutChangingEachOther) {
  Prefilled P(32, 4, 23, 12);
  auto &[C, Rng, A, MA] = P;
  SequenceId F = *C->forkSequence(A), G = *C->forkSequence(A);
  SliceModel MF[2] = {MA[0], MA[1]}, MG[2] = {MA[0], MA[1]};
  // Decode steps on each; the first flushes write into the shared, half
  // full page, which the writer copies.
  for (unsigned Step = 0; Step < 9; ++Step) {
    grow(*C, F, MF, 1, Rng);
    grow(*C, A, MA, 1, Rng);
    check(*C, A, MA, Rng);
    check(*C, F, MF, Rng);
    check(*C, G, MG, Rng);
  }
  // A batch in which every holder of a shared page writes it: the last one
  // writes in place.
  SequenceId H = *C->forkSequence(G);
  SliceModel MH[2] = {MG[0], MG[1]};
  unsigned Free = C->freePages(Tensor::Keys);
  for (unsigned L = 0; L < 2; ++L) {
    // Rows 0-5 for G, rows 1-6 for H.
    std::vector<uint16_t> K = randomTokens(Rng, 7), V = randomTokens(Rng, 7);
    ASSERT_TRUE(C->append(L, {{G, 6, K.data(), V.data()},
                              {H, 6, K.data() + kRow, V.data() + kRow}})
                    .ok());
    MG[L].K.append(K.data(), 6);
    MG[L].V.append(V.data(), 6);
    MH[L].K.append(K.data() + kRow, 6);
    MH[L].V.append(V.data() + kRow, 6);
  }
  check(*C, G, MG, Rng);
  check(*C, H, MH, Rng);
  // Keys: 18 quantized + 6 flushed = 24 (6 pages); G and H shared the 5th
  // page, half full: one copy, and a new 6th page each.
  EXPECT_EQ(C->freePages(Tensor::Keys), Free - 3);
  for (SequenceId S : {A, F, G, H})
    ASSERT_TRUE(C->removeSequence(S).ok());
  EXPECT_EQ(C->freePages(Tensor::Keys), 32u);
  EXPECT_EQ(C->freePages(Tensor::Values), 32u);
}

TEST(ForkTest, CopyOnWriteCountsAgainstCapacity) {
  // A holds 5 of 6 key pages. Its fork shares them; a flush into the shared
  // half-full page needs a copy, and two such flushes need two pages.
  Prefilled P(6, 4, 23, 13);
  auto &[C, Rng, A, M] = P;
  SequenceId F = *C->forkSequence(A), G = *C->forkSequence(A);
  std::vector<uint16_t> K = randomTokens(Rng, 2), V = randomTokens(Rng, 2);
  Snapshot Before = snapshot(*C, {A, F, G});
  Status S =
      C->append(0, {{F, 2, K.data(), V.data()}, {G, 2, K.data(), V.data()}});
  ASSERT_FALSE(S.ok());
  EXPECT_EQ(S.code(), ErrorCode::Capacity);
  EXPECT_NE(S.message().find("out of keys pages: the append needs 2 more, 1 "
                             "are free"),
            std::string::npos)
      << S.message();
  EXPECT_TRUE(snapshot(*C, {A, F, G}) == Before);
  ASSERT_TRUE(C->append(0, {{F, 2, K.data(), V.data()}}).ok());
}

TEST(ForkTest, FailedForksChangeNothing) {
  Prefilled P(16, 2, 9, 14);
  auto &[C, Rng, A, M] = P;
  Snapshot Before = snapshot(*C, {A});
  Expected<SequenceId> Unknown = C->forkSequence(77);
  ASSERT_FALSE(Unknown.ok());
  EXPECT_EQ(Unknown.message(), "unknown sequence 77");
  ASSERT_TRUE(C->forkSequence(A).ok());
  Before = snapshot(*C, C->sequences());
  Expected<SequenceId> Full = C->forkSequence(A);
  ASSERT_FALSE(Full.ok());
  EXPECT_EQ(Full.status().code(), ErrorCode::Capacity);
  EXPECT_EQ(Full.message(),
            "fork of sequence 1: all 2 sequence slots are in use");
  EXPECT_TRUE(snapshot(*C, C->sequences()) == Before);
}

//===----------------------------------------------------------------------===//
// Save and restore
//===----------------------------------------------------------------------===//

class CacheFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    Source = makeCache(32, 4);
    std::mt19937 Rng(15);
    A = *Source->addSequence();
    B = *Source->addSequence();
    grow(*Source, A, MA, 23, Rng);
    grow(*Source, B, MB, 3, Rng);
    F = *Source->forkSequence(A);
    grow(*Source, F, MA, 2, Rng); // A's model now describes F
    Bytes = *Source->serialize();
    // The target already holds a sequence, which a restore must keep.
    Target = makeCache(32, 4);
    Kept = *Target->addSequence();
    grow(*Target, Kept, MKept, 13, Rng);
    Before = snapshot(*Target, {Kept});
  }

  /// Expects restoring Data to fail with Code and a message containing Text,
  /// leaving the target as it was.
  void expectRejected(const std::vector<uint8_t> &Data, ErrorCode Code,
                      const std::string &Text) {
    Expected<std::vector<SequenceId>> Ids =
        Target->deserialize(Data.data(), Data.size());
    ASSERT_FALSE(Ids.ok());
    EXPECT_EQ(Ids.status().code(), Code) << Ids.message();
    EXPECT_NE(Ids.message().find(Text), std::string::npos) << Ids.message();
    EXPECT_EQ(Target->sequences(), std::vector<SequenceId>{Kept});
    EXPECT_TRUE(snapshot(*Target, {Kept}) == Before) << Ids.message();
  }

  /// Expects the saved file with byte At set to Value, and its checksum
  /// recomputed (a consistent but hostile file), to be rejected with Text.
  void expectPatchRejected(size_t At, uint8_t Value, const std::string &Text) {
    std::vector<uint8_t> Patched = Bytes;
    Patched[At] = Value;
    expectRejected(resealed(Patched), ErrorCode::File, Text);
  }

  /// Data with its checksum recomputed (a consistent but hostile file).
  static std::vector<uint8_t> resealed(std::vector<uint8_t> Data) {
    uint64_t Sum = kvq::fnv1a64(std::string_view(
        reinterpret_cast<const char *>(Data.data()), Data.size() - 8));
    for (unsigned I = 0; I < 8; ++I)
      Data[Data.size() - 8 + I] = uint8_t(Sum >> (8 * I));
    return Data;
  }

  std::unique_ptr<Cache> Source, Target;
  SequenceId A = 0, B = 0, F = 0, Kept = 0;
  SliceModel MA[2], MB[2], MKept[2];
  std::vector<uint8_t> Bytes;
  Snapshot Before;
};

TEST_F(CacheFileTest, RestoreIsBitExact) {
  std::string Path = ::testing::TempDir() + "kvq-cache-file-test.kvqc";
  ASSERT_TRUE(Source->save(Path).ok());
  Expected<std::vector<SequenceId>> Ids = Target->restore(Path);
  ASSERT_TRUE(Ids.ok()) << Ids.message();
  ASSERT_EQ(Ids->size(), 3u);
  std::vector<SequenceId> Saved = {A, B, F};
  for (size_t I = 0; I < 3; ++I) {
    EXPECT_TRUE(contents(*Target, (*Ids)[I]) == contents(*Source, Saved[I]));
    for (unsigned L = 0; L < 2; ++L)
      EXPECT_EQ(attention(*Target, L, {(*Ids)[I]}),
                attention(*Source, L, {Saved[I]}));
  }
  EXPECT_EQ(contents(*Target, Kept).Bytes, Before.Bytes);
  // Both go on identically.
  std::mt19937 R1(16), R2(16);
  SliceModel M1[2], M2[2];
  grow(*Source, F, M1, 7, R1);
  grow(*Target, (*Ids)[2], M2, 7, R2);
  EXPECT_TRUE(contents(*Target, (*Ids)[2]) == contents(*Source, F));
  std::remove(Path.c_str());
}

TEST_F(CacheFileTest, SavesChosenSequences) {
  Expected<std::vector<uint8_t>> OnlyB = Source->serialize({B});
  ASSERT_TRUE(OnlyB.ok());
  Expected<std::vector<SequenceId>> Ids =
      Target->deserialize(OnlyB->data(), OnlyB->size());
  ASSERT_TRUE(Ids.ok()) << Ids.message();
  ASSERT_EQ(Ids->size(), 1u);
  std::mt19937 Rng(17);
  check(*Target, Ids->front(), MB, Rng);
  Expected<std::vector<uint8_t>> Unknown = Source->serialize({B, 99});
  ASSERT_FALSE(Unknown.ok());
  EXPECT_EQ(Unknown.message(), "save: unknown sequence 99");
}

TEST_F(CacheFileTest, TruncatedFilesAreRejected) {
  for (size_t Size : {size_t(0), size_t(7), size_t(31), size_t(32),
                      Bytes.size() / 2, Bytes.size() - 1}) {
    SCOPED_TRACE("size " + std::to_string(Size));
    std::vector<uint8_t> Cut(Bytes.begin(), Bytes.begin() + Size);
    expectRejected(Cut, ErrorCode::File,
                   Size < 32 ? "truncated" : "checksum mismatch");
  }
}

TEST_F(CacheFileTest, CorruptFilesAreRejected) {
  for (size_t At : {size_t(12), size_t(20), size_t(40), Bytes.size() / 2,
                    Bytes.size() - 1}) {
    SCOPED_TRACE("byte " + std::to_string(At));
    std::vector<uint8_t> Bad = Bytes;
    Bad[At] ^= 0x10;
    expectRejected(Bad, ErrorCode::File, "checksum mismatch");
  }
  std::vector<uint8_t> Magic = Bytes;
  Magic[0] = 'X';
  expectRejected(Magic, ErrorCode::File, "not a kvq cache file");
}

TEST_F(CacheFileTest, ForeignFilesAreRejected) {
  expectPatchRejected(8, 2,
                      "cache file: format version 2, this runtime reads 1");
  // Byte 16 is the first of the manifest hash.
  expectPatchRejected(16, Bytes[16] ^ 1, "saved from another artifact");
  std::vector<uint8_t> Longer = Bytes;
  Longer.insert(Longer.end() - 8, 3, 0);
  expectRejected(resealed(Longer), ErrorCode::File,
                 "3 bytes after the last sequence record");
}

TEST_F(CacheFileTest, ImpossibleCountsAreRejected) {
  // Record 0 starts at byte 24: id, 2 page counts, then layer 0's counts
  // from byte 40: keys' sink, quantized, window, values' sink, quantized,
  // window.
  expectPatchRejected(
      40, 3, "sequence record 0, layer 0 keys: impossible counts (sink 3");
  // Values of 24 tokens (2, 20, 2) beside keys of 23: each side follows the
  // flush rule, but together they would make attention read past the
  // values (found by kvq-fuzz-cache-file).
  expectPatchRejected(
      60, 2,
      "sequence record 0, layer 0: keys and values hold different "
      "tokens");
  // 40 key pages; a sequence may hold 32.
  expectPatchRejected(32, 40, "sequence record 0 holds 40 keys pages");
  expectPatchRejected(12, 200, "200 sequences, the cache has 4 slots");
}

TEST_F(CacheFileTest, NoRoomChangesNothing) {
  Target = makeCache(32, 3);
  Kept = *Target->addSequence();
  Before = snapshot(*Target, {Kept});
  expectRejected(Bytes, ErrorCode::Capacity,
                 "restore: the file holds 3 sequences, 2 slots are free");
  // A and F each hold 5 key pages (saved unshared), B none: 10, and Kept
  // holds 1 of 10.
  Target = makeCache(10, 4);
  Kept = *Target->addSequence();
  std::mt19937 Rng(18);
  SliceModel M[2];
  grow(*Target, Kept, M, 9, Rng);
  Before = snapshot(*Target, {Kept});
  expectRejected(Bytes, ErrorCode::Capacity,
                 "restore: the file holds 10 keys pages, 9 are free");
}

TEST_F(CacheFileTest, FileErrorsAreClear) {
  Expected<std::vector<SequenceId>> Missing =
      Target->restore("/nonexistent/kvq.kvqc");
  ASSERT_FALSE(Missing.ok());
  EXPECT_EQ(Missing.status().code(), ErrorCode::File);
  EXPECT_EQ(Missing.message(), "cache file: cannot open "
                               "'/nonexistent/kvq.kvqc': No such file or "
                               "directory");
  Status Unwritable = Source->save("/nonexistent/kvq.kvqc");
  ASSERT_FALSE(Unwritable.ok());
  EXPECT_EQ(Unwritable.code(), ErrorCode::File);
  EXPECT_NE(Unwritable.message().find("cannot create"), std::string::npos);
}

TEST_F(CacheFileTest, PathsWithNulBytesAreRejected) {
  // The C library would write and read Path, the part before the NUL.
  std::string Path = ::testing::TempDir() + "kvq-cache-file-nul.kvqc";
  std::remove(Path.c_str());
  std::string WithNul = Path + std::string("\0.other", 7);
  std::string Offset = std::to_string(Path.size());
  Status Saved = Source->save(WithNul);
  ASSERT_FALSE(Saved.ok());
  EXPECT_EQ(Saved.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Saved.message(),
            "save: cache file path contains a NUL byte at offset " + Offset);
  EXPECT_FALSE(std::ifstream(Path).good());
  EXPECT_FALSE(std::ifstream(Path + ".partial").good());

  // A good file behind the NUL is not read.
  ASSERT_TRUE(Source->save(Path).ok());
  Expected<std::vector<SequenceId>> Ids = Target->restore(WithNul);
  ASSERT_FALSE(Ids.ok());
  EXPECT_EQ(Ids.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Ids.message(),
            "restore: cache file path contains a NUL byte at offset " + Offset);
  EXPECT_EQ(Target->sequences(), std::vector<SequenceId>{Kept});
  EXPECT_TRUE(snapshot(*Target, {Kept}) == Before);
  std::remove(Path.c_str());
}

/// Expects restoring Path to fail with a File error naming it "not a
/// regular file", leaving the target as it was.
void expectNotRegular(Cache &Target, SequenceId Kept, const Snapshot &Before,
                      const std::string &Path) {
  Expected<std::vector<SequenceId>> Ids = Target.restore(Path);
  ASSERT_FALSE(Ids.ok());
  EXPECT_EQ(Ids.status().code(), ErrorCode::File);
  EXPECT_EQ(Ids.message(), "cache file: '" + Path + "' is not a regular file");
  EXPECT_EQ(Target.sequences(), std::vector<SequenceId>{Kept});
  EXPECT_TRUE(snapshot(Target, {Kept}) == Before);
}

// A directory made the standard library throw through restore (Python saw
// a RuntimeError, not kvq.Error); a FIFO blocked it forever, waiting for a
// writer. Both are refused before anything is read.
TEST_F(CacheFileTest, OnlyRegularFilesAreRestored) {
  std::string Dir = ::testing::TempDir() + "kvq-cache-file-dir";
  std::filesystem::remove_all(Dir);
  ASSERT_TRUE(std::filesystem::create_directory(Dir));
  expectNotRegular(*Target, Kept, Before, Dir);
  std::string Fifo = ::testing::TempDir() + "kvq-cache-file-fifo";
  std::filesystem::remove(Fifo);
  ASSERT_EQ(mkfifo(Fifo.c_str(), 0600), 0);
  expectNotRegular(*Target, Kept, Before, Fifo);
  // With a writer that never writes, too.
  int Writer = open(Fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(Writer, 0);
  expectNotRegular(*Target, Kept, Before, Fifo);
  close(Writer);
  expectNotRegular(*Target, Kept, Before, "/dev/null");
  std::filesystem::remove_all(Dir);
  std::filesystem::remove(Fifo);
}

// save wrote through a symlink planted at <path>.partial, overwriting its
// target. The link is removed, not followed.
TEST_F(CacheFileTest, SaveDoesNotFollowAPlantedPartialFile) {
  std::string Path = ::testing::TempDir() + "kvq-cache-file-planted.kvqc";
  std::string Victim = ::testing::TempDir() + "kvq-cache-file-victim";
  std::filesystem::remove(Path);
  std::filesystem::remove(Path + ".partial");
  std::ofstream(Victim, std::ios::trunc) << "not to be overwritten";
  std::filesystem::create_symlink(Victim, Path + ".partial");
  ASSERT_TRUE(Source->save(Path).ok());
  std::ifstream In(Victim);
  std::string Text((std::istreambuf_iterator<char>(In)),
                   std::istreambuf_iterator<char>());
  EXPECT_EQ(Text, "not to be overwritten");
  EXPECT_FALSE(std::filesystem::exists(
      std::filesystem::symlink_status(Path + ".partial")));
  EXPECT_TRUE(
      std::filesystem::is_regular_file(std::filesystem::symlink_status(Path)));
  Expected<std::vector<SequenceId>> Ids = Target->restore(Path);
  ASSERT_TRUE(Ids.ok()) << Ids.message();
  EXPECT_EQ(Ids->size(), 3u);
  // A stale neighbour left by an interrupted save is replaced too.
  std::ofstream(Path + ".partial") << "stale";
  ASSERT_TRUE(Source->save(Path).ok());
  EXPECT_FALSE(std::filesystem::exists(Path + ".partial"));
  std::filesystem::remove(Path);
  std::filesystem::remove(Victim);
}

TEST_F(CacheFileTest, CApi) {
  std::string Path = ::testing::TempDir() + "kvq-cache-file-capi.kvqc";
  kvq_artifact *Art = nullptr;
  ASSERT_EQ(kvq_artifact_open(kMockDir.c_str(), &Art), KVQ_OK);
  kvq_cache *C = nullptr;
  ASSERT_EQ(kvq_cache_create(Art, nullptr, &C), KVQ_OK);
  kvq_artifact_close(Art);
  kvq_sequence S = 0, Forked = 0, Ids[8];
  ASSERT_EQ(kvq_cache_add_sequence(C, &S), KVQ_OK);
  std::vector<float> K(5 * kRow, 0.25f), V(5 * kRow, -1.0f);
  kvq_append_item Item = {S, 5, K.data(), V.data(), K.size() * 4, V.size() * 4};
  ASSERT_EQ(kvq_cache_append_f32(C, 0, &Item, 1), KVQ_OK);
  ASSERT_EQ(kvq_cache_fork_sequence(C, S, &Forked), KVQ_OK);
  ASSERT_EQ(kvq_cache_save(C, Path.c_str(), &Forked, 1), KVQ_OK);
  size_t N = 0;
  EXPECT_EQ(kvq_cache_restore(C, Path.c_str(), Ids, 1, &N),
            KVQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("room for 1 ids"),
            std::string::npos);
  ASSERT_EQ(kvq_cache_restore(C, Path.c_str(), Ids, 8, &N), KVQ_OK);
  EXPECT_EQ(N, 1u);
  EXPECT_EQ(kvq_cache_fork_sequence(C, 999, &Forked),
            KVQ_ERROR_INVALID_ARGUMENT);
  std::ofstream(Path, std::ios::binary | std::ios::trunc) << "KVQCACHE";
  EXPECT_EQ(kvq_cache_restore(C, Path.c_str(), Ids, 8, &N), KVQ_ERROR_FILE);
  EXPECT_NE(std::string(kvq_last_error()).find("truncated"), std::string::npos);
  // A directory is a file error, not a failure of the backend.
  EXPECT_EQ(kvq_cache_restore(C, ::testing::TempDir().c_str(), Ids, 8, &N),
            KVQ_ERROR_FILE);
  EXPECT_NE(std::string(kvq_last_error()).find("is not a regular file"),
            std::string::npos);
  kvq_cache_destroy(C);
  std::remove(Path.c_str());
}

} // namespace
