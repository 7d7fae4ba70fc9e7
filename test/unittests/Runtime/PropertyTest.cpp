//===- PropertyTest.cpp - Random call sequences against the model ---------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// Drives a small mock cache with random sequences of valid and invalid
// calls: add, remove, append (prefill, decode, past the pages or the block
// table, non-finite, malformed), attend, fork, save and restore (intact and
// corrupted files). After every failing call the cache must be
// byte-identical to before it (counts, sinks, windows, pages, free pages,
// memory figures); after every successful one each sequence must hold what
// the model of the flush rule says (MockCache.h), and attention must match.
//
// KVQ_PROPERTY_SEED and KVQ_PROPERTY_CALLS override the seed and the number
// of calls for longer runs.
//
//===----------------------------------------------------------------------===//

#include "MockCache.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <map>

using namespace kvq::runtime;
using namespace kvq::runtime::mock;

namespace {

unsigned envOr(const char *Name, unsigned Default) {
  const char *V = std::getenv(Name);
  return V ? unsigned(std::strtoul(V, nullptr, 10)) : Default;
}

/// A call's expected outcome: Valid calls may fail only for capacity.
enum class Kind { Valid, Invalid };

class PropertyTest : public ::testing::Test {
protected:
  void SetUp() override {
    C = makeCache(/*Pages=*/24, /*Seqs=*/4, /*Threads=*/2,
                  /*MaxPagesPerSeq=*/10);
    ASSERT_TRUE(C);
    Rng.seed(envOr("KVQ_PROPERTY_SEED", 1));
  }

  unsigned pick(unsigned N) {
    return std::uniform_int_distribution<>(0, N - 1)(Rng);
  }
  bool chance(unsigned Percent) { return pick(100) < Percent; }

  /// A live sequence, or an unknown id now and then.
  SequenceId anySequence() {
    std::vector<SequenceId> Live = C->sequences();
    if (Live.empty() || chance(5))
      return 1000 + pick(100);
    return Live[pick(unsigned(Live.size()))];
  }

  /// A sequence id the cache does not hold (ids grow with every add, fork
  /// and restore, so a fixed one is live in long runs).
  SequenceId unknownSequence() {
    std::vector<SequenceId> Live = C->sequences();
    SequenceId Id = 7777;
    while (std::find(Live.begin(), Live.end(), Id) != Live.end())
      ++Id;
    return Id;
  }

  /// Runs one call; checks the cache against the model afterwards.
  template <typename Fn> void call(const char *What, Kind K, Fn &&Body) {
    SCOPED_TRACE(What);
    Snapshot Before = snapshot(*C, C->sequences());
    Status S = Body();
    ++Calls[What][S.ok()];
    if (!S.ok()) {
      if (K == Kind::Valid) {
        ASSERT_EQ(S.code(), ErrorCode::Capacity) << S.message();
      }
      ASSERT_TRUE(snapshot(*C, C->sequences()) == Before) << S.message();
      return;
    }
    ASSERT_EQ(K, Kind::Valid) << "an invalid call succeeded";
    checkAll();
  }

  void checkAll() {
    ASSERT_EQ(C->sequences().size(), Models.size());
    for (auto &[Seq, M] : Models)
      for (unsigned L = 0; L < 2; ++L) {
        checkSide(*C, Seq, L, Tensor::Keys, M[L].K);
        checkSide(*C, Seq, L, Tensor::Values, M[L].V);
      }
  }

  void step();
  void append(bool Valid);
  void attend(bool Valid);
  void fork();
  void saveRestore(bool Corrupt);

  std::unique_ptr<Cache> C;
  std::mt19937 Rng;
  std::map<SequenceId, std::array<SliceModel, 2>> Models;
  /// Per call kind: failures, successes.
  std::map<std::string, std::array<unsigned, 2>> Calls;
};

void PropertyTest::append(bool Valid) {
  unsigned Layer = pick(2);
  std::vector<SequenceId> Live = C->sequences();
  std::vector<std::vector<uint16_t>> Data;
  std::vector<AppendItem> Batch;
  for (SequenceId Seq : Live) {
    if (chance(40))
      continue;
    // Mostly decode steps, some prefills, a few past the block table.
    unsigned N = chance(70) ? 1 : chance(85) ? pick(12) : 20 + pick(30);
    Data.push_back(randomTokens(Rng, N));
    Data.push_back(randomTokens(Rng, N));
    Batch.push_back({Seq, N, Data[Data.size() - 2].data(), Data.back().data()});
  }
  if (!Valid) {
    if (Batch.empty() || chance(20))
      Batch.push_back({anySequence() + 1000, 1, nullptr, nullptr});
    AppendItem &I = Batch[pick(unsigned(Batch.size()))];
    switch (pick(4)) {
    case 0: // non-finite
      if (I.NumTokens && I.K) {
        uint16_t *Bad = const_cast<uint16_t *>(
            static_cast<const uint16_t *>(chance(50) ? I.K : I.V));
        Bad[pick(I.NumTokens * kRow)] = chance(50) ? 0x7e00 : 0xfc00;
      } else {
        I.Seq = unknownSequence();
      }
      break;
    case 1: // a sequence twice
      Batch.push_back(I);
      break;
    case 2: // a wrong shape
      I.KBytes = I.NumTokens * kRow * 2 + 2;
      break;
    default: // a layer out of range
      Layer = 2 + pick(3);
    }
  }
  call(Valid ? "append" : "append (invalid)",
       Valid ? Kind::Valid : Kind::Invalid, [&] {
         Status S = C->append(Layer, Batch);
         if (S.ok())
           for (const AppendItem &I : Batch) {
             Models[I.Seq][Layer].K.append(static_cast<const uint16_t *>(I.K),
                                           I.NumTokens);
             Models[I.Seq][Layer].V.append(static_cast<const uint16_t *>(I.V),
                                           I.NumTokens);
           }
         return S;
       });
}

void PropertyTest::attend(bool Valid) {
  std::vector<SequenceId> Seqs = C->sequences();
  if (Seqs.empty())
    return;
  unsigned Layer = pick(2);
  if (!Valid) {
    call("attend (invalid)", Kind::Invalid, [&] {
      std::vector<uint16_t> Q(Seqs.size() * kHq * kD, 0x3c00);
      std::vector<float> Out(Q.size());
      if (chance(50))
        Q[pick(unsigned(Q.size()))] = 0x7c00;
      else
        Seqs[pick(unsigned(Seqs.size()))] = unknownSequence();
      return C->attend(Layer, Seqs, Q.data(), Out.data());
    });
    return;
  }
  std::vector<const SliceModel *> Ms;
  for (SequenceId Seq : Seqs)
    Ms.push_back(&Models[Seq][Layer]);
  checkAttention(*C, Layer, Seqs, Ms, Rng);
  ++Calls["attend"][1];
}

void PropertyTest::fork() {
  SequenceId Source = anySequence();
  bool Known = Models.count(Source);
  call("fork", Known ? Kind::Valid : Kind::Invalid, [&]() -> Status {
    Expected<SequenceId> F = C->forkSequence(Source);
    if (!F.ok())
      return F.status();
    Models[*F] = Models[Source];
    return Status::success();
  });
}

void PropertyTest::saveRestore(bool Corrupt) {
  std::vector<SequenceId> Chosen;
  for (SequenceId Seq : C->sequences())
    if (chance(50))
      Chosen.push_back(Seq);
  if (Chosen.empty())
    return;
  Expected<std::vector<uint8_t>> Bytes = C->serialize(Chosen);
  ASSERT_TRUE(Bytes.ok()) << Bytes.message();
  if (Corrupt) {
    if (chance(50))
      Bytes->resize(pick(unsigned(Bytes->size())));
    else
      (*Bytes)[pick(unsigned(Bytes->size()))] ^= uint8_t(1 + pick(255));
  }
  call(Corrupt ? "restore (corrupt)" : "restore",
       Corrupt ? Kind::Invalid : Kind::Valid, [&]() -> Status {
         Expected<std::vector<SequenceId>> Ids =
             C->deserialize(Bytes->data(), Bytes->size());
         if (!Ids.ok())
           return Ids.status();
         for (size_t I = 0; I < Ids->size(); ++I)
           Models[(*Ids)[I]] = Models[Chosen[I]];
         return Status::success();
       });
}

void PropertyTest::step() {
  switch (pick(10)) {
  case 0:
    call("add", Kind::Valid, [&]() -> Status {
      Expected<SequenceId> S = C->addSequence();
      if (!S.ok())
        return S.status();
      Models[*S];
      return Status::success();
    });
    break;
  case 1: {
    SequenceId Seq = anySequence();
    call("remove", Models.count(Seq) ? Kind::Valid : Kind::Invalid, [&] {
      Status S = C->removeSequence(Seq);
      if (S.ok())
        Models.erase(Seq);
      return S;
    });
    break;
  }
  case 2:
  case 3:
  case 4:
    append(/*Valid=*/true);
    break;
  case 5:
    append(/*Valid=*/false);
    break;
  case 6:
    attend(/*Valid=*/chance(70));
    break;
  case 7:
    fork();
    break;
  default:
    saveRestore(/*Corrupt=*/chance(50));
  }
}

TEST_F(PropertyTest, FailedCallsChangeNothing) {
  unsigned N = envOr("KVQ_PROPERTY_CALLS", 3000);
  for (unsigned I = 0; I < N && !HasFatalFailure(); ++I) {
    SCOPED_TRACE("call " + std::to_string(I));
    step();
  }
  // Every kind of call, and every kind that can fail, did so.
  for (const char *What :
       {"add", "remove", "append", "append (invalid)", "attend",
        "attend (invalid)", "fork", "restore", "restore (corrupt)"}) {
    EXPECT_GT(Calls[What][0] + Calls[What][1], 0u) << What;
    std::cout << What << ": " << Calls[What][1] << " succeeded, "
              << Calls[What][0] << " failed\n";
  }
  EXPECT_GT(Calls["append"][0], 0u) << "no append ran out of capacity";
  EXPECT_GT(Calls["append (invalid)"][0], 0u);
  EXPECT_GT(Calls["restore (corrupt)"][0], 0u);
}

} // namespace
