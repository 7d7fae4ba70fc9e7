//===- LinkedKernelsTest.cpp - Host code linked into the program ----------===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//
//
// kvq_add_spec without ARTIFACT_ONLY links the artifact's kernels.o into this
// program; a cache created with HostCode::Linked finds the kernels there
// instead of dlopen'ing kernels.so, and computes the same bytes.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <random>

using namespace kvq::runtime;

namespace {

std::unique_ptr<Cache> create(HostCode Code) {
  Expected<std::shared_ptr<const Artifact>> A =
      Artifact::open(KVQ_ARTIFACT_DIR_E2E_LINKED_KIVI2);
  EXPECT_TRUE(A.ok()) << A.message();
  if (!A.ok())
    return nullptr;
  CacheOptions O;
  O.Code = Code;
  O.MaxSequences = 1;
  O.PagesPerTensor = 4;
  Expected<std::unique_ptr<Cache>> C = Cache::create(*A, O);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? std::move(*C) : nullptr;
}

TEST(LinkedKernelsTest, LinkedCodeMatchesTheSharedObject) {
  std::unique_ptr<Cache> Linked = create(HostCode::Linked);
  std::unique_ptr<Cache> Shared = create(HostCode::SharedObject);
  ASSERT_TRUE(Linked && Shared);
  const ModelShape &M = Linked->manifest().Model;
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  std::mt19937 Rng(5);
  std::normal_distribution<float> Dist;
  std::vector<float> K(300 * Row), V(300 * Row), Q(size_t(M.Heads) * M.HeadDim);
  for (float *X : {K.data(), V.data()})
    for (size_t I = 0; I < 300 * Row; ++I)
      X[I] = Dist(Rng);
  for (float &X : Q)
    X = Dist(Rng);
  std::vector<float> Out[2];
  int I = 0;
  for (Cache *C : {Linked.get(), Shared.get()}) {
    SequenceId S = *C->addSequence();
    ASSERT_TRUE(
        C->append(0, std::vector<AppendItemF32>{{S, 300, K.data(), V.data()}})
            .ok());
    Out[I].resize(Q.size());
    ASSERT_TRUE(C->attendF32(0, {S}, Q.data(), Out[I].data()).ok());
    ++I;
  }
  EXPECT_EQ(Out[0], Out[1]);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    EXPECT_EQ(*Linked->readSlicePage(T, 1, 0, 1, 1),
              *Shared->readSlicePage(T, 1, 0, 1, 1));
}

} // namespace
