//===- ShippedSpecsTest.cpp - CPU and PTX agree on every shipped spec
//------===//
//
// Every kernel kvq-opt emits for every shipped spec it supports runs on the
// CPU backend (host code) and on the PTX interpreter (the CUDA backend's path
// through the DeviceDriver interface) with the same inputs: page bytes
// (codes and parameters), windows, sinks and key norms must be identical,
// and attention outputs agree within
//   max |cpu - ptx| <= 2e-3 * max |cpu| + 1e-4
// (the backends differ only in exp2 and summation order). Each distinct
// attend kernel is exercised on the first layer it serves; OTT's pools
// (index and entries) must be identical too.
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"
#include "kvq/Support/Float.h"
#include "kvq/ABI/KernelABI.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

using namespace kvq::runtime;

namespace {

/// A cache on one backend, holding one sequence.
struct Side {
  std::unique_ptr<Cache> C;
  SequenceId Seq = 0;
};

Side makeSide(std::shared_ptr<const Artifact> A, bool Interpreter,
              unsigned Pages = 8) {
  CacheOptions O;
  O.MaxSequences = 1;
  O.PagesPerTensor = Pages;
  Expected<std::unique_ptr<Cache>> C =
      Interpreter ? [&]() -> Expected<std::unique_ptr<Cache>> {
    auto B = createDeviceBackend(*A, std::make_unique<kvq::ptx::InterpDriver>(),
                                 "sm_80");
    if (!B.ok())
      return B.status();
    return Cache::create(A, O, std::move(*B));
  }()
      : Cache::create(A, O);
  EXPECT_TRUE(C.ok()) << C.message();
  if (!C.ok())
    return {};
  Side S{std::move(*C)};
  S.Seq = *S.C->addSequence();
  return S;
}

/// Layers whose attend kernel is the first use of that kernel.
std::vector<unsigned> distinctAttendLayers(const Manifest &M) {
  std::set<std::string> Seen;
  std::vector<unsigned> Layers;
  for (unsigned L = 0; L < M.Layers.size(); ++L)
    if (Seen.insert(M.Layers[L].Attend).second)
      Layers.push_back(L);
  return Layers;
}

/// The layers to append so that L can be appended: the layers whose codes
/// it reads, then L.
std::vector<unsigned> appendOrder(const Manifest &M, unsigned L) {
  std::set<unsigned> Owners;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (int64_t Owner = M.tensor(T).Layers[L].Slice.CodesFrom; Owner >= 0)
      Owners.insert(unsigned(Owner));
  std::vector<unsigned> Order(Owners.begin(), Owners.end());
  Order.push_back(L);
  return Order;
}

class ShippedSpecTest : public ::testing::TestWithParam<const char *> {
protected:
  /// Opens the shipped artifact the parameter names.
  void SetUp() override {
    Expected<std::shared_ptr<const Artifact>> Opened =
        Artifact::open(std::string(KVQ_SHIPPED_ARTIFACTS) + "/" + GetParam());
    ASSERT_TRUE(Opened.ok()) << Opened.message();
    A = *Opened;
  }

  std::shared_ptr<const Artifact> A;
};

TEST_P(ShippedSpecTest, CpuAndInterpreterAgree) {
  const Manifest &M = A->manifest();
  Side Cpu = makeSide(A, false), Ptx = makeSide(A, true);
  ASSERT_TRUE(Cpu.C && Ptx.C);

  // 300 tokens cross 128-token pages, KIVI's 128-token key flushes and
  // InnerQ's sink and window; then three decode steps.
  const unsigned Prompt = 300, Steps = 3;
  size_t Row = size_t(M.Model.KvHeads) * M.Model.HeadDim;
  std::mt19937 Rng(7);
  std::normal_distribution<float> Normal(0.0f, 1.0f);
  auto Random = [&](size_t N) {
    std::vector<float> X(N);
    for (float &V : X)
      V = Normal(Rng);
    return X;
  };
  for (unsigned L : distinctAttendLayers(M)) {
    SCOPED_TRACE("layer " + std::to_string(L));
    for (unsigned Step = 0; Step <= Steps; ++Step) {
      unsigned N = Step == 0 ? Prompt : 1;
      // A code-sharing layer's owner is appended first (KernelABI.md).
      for (unsigned Layer : appendOrder(M, L)) {
        std::vector<float> K = Random(N * Row), V = Random(N * Row);
        ASSERT_TRUE(
            Cpu.C->append(Layer, {{Cpu.Seq, N, K.data(), V.data()}}).ok());
        ASSERT_TRUE(
            Ptx.C->append(Layer, {{Ptx.Seq, N, K.data(), V.data()}}).ok());
      }

      std::vector<float> Q = Random(size_t(M.Model.Heads) * M.Model.HeadDim);
      std::vector<float> OutCpu, OutPtx;
      ASSERT_TRUE(Cpu.C->attendF32(L, {Cpu.Seq}, Q, OutCpu).ok());
      Status S = Ptx.C->attendF32(L, {Ptx.Seq}, Q, OutPtx);
      ASSERT_TRUE(S.ok()) << S.message();
      double MaxRef = 0, MaxErr = 0;
      for (size_t I = 0; I < OutCpu.size(); ++I) {
        MaxRef = std::max(MaxRef, double(std::fabs(OutCpu[I])));
        MaxErr = std::max(MaxErr, double(std::fabs(OutCpu[I] - OutPtx[I])));
      }
      EXPECT_LE(MaxErr, 2e-3 * MaxRef + 1e-4) << "step " << Step;
    }
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      SCOPED_TRACE(toString(T));
      EXPECT_EQ(*Cpu.C->readWindow(T, Cpu.Seq, L),
                *Ptx.C->readWindow(T, Ptx.Seq, L));
      EXPECT_EQ(*Cpu.C->readSink(T, Cpu.Seq, L),
                *Ptx.C->readSink(T, Ptx.Seq, L));
      unsigned Pages = *Cpu.C->numPages(T, Cpu.Seq);
      ASSERT_EQ(Pages, *Ptx.C->numPages(T, Ptx.Seq));
      for (unsigned P = 0; P < Pages; ++P)
        for (unsigned H = 0; H < M.Model.KvHeads; ++H)
          ASSERT_EQ(*Cpu.C->readSlicePage(T, Cpu.Seq, L, H, P),
                    *Ptx.C->readSlicePage(T, Ptx.Seq, L, H, P))
              << "page " << P << " kv-head " << H;
    }
    EXPECT_EQ(*Cpu.C->readKeyNorms(Cpu.Seq, L),
              *Ptx.C->readKeyNorms(Ptx.Seq, L));
    if (M.Pool.isTracked(L)) {
      EXPECT_EQ(*Cpu.C->readPoolIndex(Cpu.Seq, L),
                *Ptx.C->readPoolIndex(Ptx.Seq, L));
      for (Tensor T : {Tensor::Keys, Tensor::Values})
        EXPECT_EQ(*Cpu.C->readPoolEntries(T, Cpu.Seq, L),
                  *Ptx.C->readPoolEntries(T, Ptx.Seq, L))
            << toString(T) << " pool entries";
    }
  }
}

/// Device buffers of one test, freed with it.
class Buffers {
public:
  explicit Buffers(Backend &B) : B(B) {}
  ~Buffers() {
    for (DevicePtr P : Owned)
      (void)B.free(P);
  }
  /// A cleared buffer of Bytes (at least 4).
  DevicePtr get(size_t Bytes) {
    Expected<DevicePtr> P = B.allocate(std::max<size_t>(Bytes, 4));
    EXPECT_TRUE(P.ok()) << P.message();
    if (!P.ok())
      return 0;
    Owned.push_back(*P);
    EXPECT_TRUE(B.memset(*P, 0, std::max<size_t>(Bytes, 4)).ok());
    return *P;
  }

private:
  Backend &B;
  std::vector<DevicePtr> Owned;
};

/// Each flush kernel of layer 0 of every shipped spec, the host code and
/// the PTX on the interpreter, launched alone on one flush unit of input
/// tokens: `nonFinite` stays 0 for finite tokens and is set by a NaN or an
/// infinity at a random place (docs/KernelABI.md, "flush").
TEST_P(ShippedSpecTest, FlushKernelsFlagNonFiniteTokens) {
  const Manifest &M = A->manifest();
  ASSERT_EQ(M.Model.Type, DType::F16) << "the shipped specs' inputs are f16";
  size_t Row = size_t(M.Model.KvHeads) * M.Model.HeadDim;
  std::mt19937 Rng(17);
  std::normal_distribution<float> Normal(0.0f, 1.0f);
  for (bool Interpreter : {false, true}) {
    SCOPED_TRACE(Interpreter ? "PTX interpreter" : "host code");
    Expected<std::unique_ptr<Backend>> B =
        Interpreter
            ? createDeviceBackend(
                  *A, std::make_unique<kvq::ptx::InterpDriver>(), "sm_80")
            : createCpuBackend(*A);
    ASSERT_TRUE(B.ok()) << B.message();
    Buffers Mem(**B);
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      SCOPED_TRACE(toString(T));
      const TensorLayout &TL = M.tensor(T);
      const KernelInfo *K = M.kernel(TL.Layers[0].FlushKernel);
      ASSERT_TRUE(K);
      unsigned Tokens = TL.Flush,
               Pages = (Tokens + M.PageTokens - 1) / M.PageTokens;
      std::vector<uint32_t> Table(Pages);
      for (unsigned P = 0; P < Pages; ++P)
        Table[P] = P;
      std::vector<float> Ones(Row, 1.0f);
      DevicePtr Input = Mem.get(Tokens * Row * 2), TableAt = Mem.get(Pages * 4),
                Norms = Mem.get(Row * 4), Flag = Mem.get(4);
      ASSERT_TRUE((*B)->copyToDevice(TableAt, Table.data(), Pages * 4).ok());
      ASSERT_TRUE((*B)->copyToDevice(Norms, Ones.data(), Row * 4).ok());
      using F = kvq::abi::FlushArgs;
      kvq::abi::KernelArgs Args(kvq::abi::KernelKind::Flush);
      Args.set(F::Window, Mem.get(TL.WindowCapacity * Row * 2));
      Args.set(F::Input, Input);
      Args.set(F::Pages,
               Mem.get(Pages * TL.PageBytes) + TL.Layers[0].Slice.Offset);
      Args.set(F::Table, TableAt);
      Args.set(F::Norms, Norms);
      Args.set(F::Saturated, Mem.get(4));
      Args.set(F::NonFinite, Flag);
      Args.set(F::WindowHead, int32_t(0));
      Args.set(F::WindowTokens, int32_t(0));
      Args.set(F::DestPos, int32_t(0));
      Args.set(F::NumTokens, int32_t(Tokens));
      Args.set(F::TableRow, int32_t(0));
      ASSERT_TRUE(Args.complete());
      for (uint16_t Bad : {uint16_t(0), uint16_t(0x7e00), uint16_t(0xfc00)}) {
        std::vector<uint16_t> X(Tokens * Row);
        for (uint16_t &E : X)
          E = kvq::fp::floatToHalfNearest(Normal(Rng));
        if (Bad)
          X[Rng() % X.size()] = Bad;
        ASSERT_TRUE((*B)->copyToDevice(Input, X.data(), X.size() * 2).ok());
        ASSERT_TRUE((*B)->memset(Flag, 0, 4).ok());
        ASSERT_TRUE((*B)->launch(K->Name, Dim3{1, M.Model.KvHeads, 1}, K->Block,
                                 K->SharedBytes, Args.get())
                        .ok());
        ASSERT_TRUE((*B)->synchronize().ok());
        uint32_t Set = 2;
        ASSERT_TRUE((*B)->copyToHost(&Set, Flag, 4).ok());
        EXPECT_EQ(Set, Bad ? 1u : 0u) << "input " << std::hex << Bad;
      }
    }
  }
}

/// Every byte of layer 0 of a sequence that an append may change: counts,
/// sinks, windows and the slices of every page held.
std::vector<std::vector<uint8_t>> layerZeroBytes(Cache &C, SequenceId Seq) {
  std::vector<std::vector<uint8_t>> Out;
  auto Number = [&](uint32_t X) {
    Out.push_back(std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&X),
                                       reinterpret_cast<uint8_t *>(&X + 1)));
  };
  SliceCounts Counts = *C.counts(Seq, 0);
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    for (uint32_t N : {Counts[T].Sink, Counts[T].Quantized, Counts[T].Window,
                       *C.numPages(T, Seq)})
      Number(N);
    Out.push_back(*C.readSink(T, Seq, 0));
    Out.push_back(*C.readWindow(T, Seq, 0));
    for (unsigned Pg = 0; Pg < *C.numPages(T, Seq); ++Pg)
      for (unsigned Hd = 0; Hd < C.manifest().Model.KvHeads; ++Hd)
        Out.push_back(*C.readSlicePage(T, Seq, 0, Hd, Pg));
  }
  return Out;
}

/// Bytes an append copies to the host.
uint64_t bytesToHost(Cache &C, const std::function<void()> &Append) {
  uint64_t Before = C.backend().counters().BytesToHost;
  Append();
  return C.backend().counters().BytesToHost - Before;
}

/// On the CPU the flushes check the host input they read where that costs
/// less than scanning it first (docs/Reliability.md, "Flushes check what
/// they read"): their undo record copies the layer's slices of each page a
/// flush continues, plus the two saturation counters, and the non-finite
/// word is read back. A bulk append does that; a decode step, whose flushes
/// read one token of input or none, scans instead and copies no page back
/// (copying one cost an fp16 step 0.29 ms at 8 kv-heads, head_dim 128). A
/// bad decode token is still rejected with layer 0 left as it was.
TEST_P(ShippedSpecTest, DecodeStepsCopyNoPageBack) {
  const Manifest &M = A->manifest();
  ASSERT_EQ(M.Model.Type, DType::F16) << "the shipped specs' inputs are f16";
  // Room for 900 tokens and a page's worth of steps.
  Side S = makeSide(A, /*Interpreter=*/false, 900 / M.PageTokens + 3);
  ASSERT_TRUE(S.C);
  size_t Row = size_t(M.Model.KvHeads) * M.Model.HeadDim;
  std::mt19937 Rng(23);
  std::normal_distribution<float> Normal(0.0f, 1.0f);
  std::vector<uint16_t> K, V;
  auto Append = [&](unsigned N) {
    for (std::vector<uint16_t> *X : {&K, &V}) {
      X->resize(N * Row);
      for (uint16_t &E : *X)
        E = kvq::fp::floatToHalfNearest(Normal(Rng));
    }
    Status St = S.C->append(0, {{S.Seq, N, K.data(), V.data()}});
    ASSERT_TRUE(St.ok()) << St.message();
  };
  Append(300);

  SliceCounts Before = *S.C->counts(S.Seq, 0);
  uint64_t Copied = bytesToHost(*S.C, [&] { Append(600); });
  SliceCounts After = *S.C->counts(S.Seq, 0);
  uint64_t Want = 0;
  if (!M.Pool.isTracked(0)) {
    Want = 3 * sizeof(uint32_t);
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      if (After[T].Quantized > Before[T].Quantized &&
          Before[T].Quantized % M.PageTokens)
        Want += M.Model.KvHeads * M.tensor(T).Layers[0].Slice.SliceBytes;
  }
  EXPECT_EQ(Copied, Want) << "a bulk append";

  for (unsigned Step = 0; Step < M.PageTokens; ++Step)
    EXPECT_LE(bytesToHost(*S.C, [&] { Append(1); }), 3 * sizeof(uint32_t))
        << "step " << Step;

  V[3] = 0x7e00;
  std::vector<std::vector<uint8_t>> Layer = layerZeroBytes(*S.C, S.Seq);
  Status St = S.C->append(0, {{S.Seq, 1, K.data(), V.data()}});
  ASSERT_FALSE(St.ok());
  EXPECT_NE(St.message().find("non-finite value at token 0, kv-head 0, "
                              "channel 3"),
            std::string::npos)
      << St.message();
  EXPECT_TRUE(layerZeroBytes(*S.C, S.Seq) == Layer);
}

INSTANTIATE_TEST_SUITE_P(
    Specs, ShippedSpecTest,
    ::testing::Values("fp16", "kivi-2bit", "asymkv-32-0", "asymkv-16-0",
                      "innerq-base", "innerq-hybrid", "innerq-small",
                      "skvq-k2v2-g128", "skvq-k2v2-g128-prerope",
                      "skvq-reorder-small", "xquant-mistral-7b",
                      "xquant-llama2-7b", "xquant-llama2-7b-chat", "ott-2bit",
                      "vector-forms", "one-lane", "rot-kivi2-d64-gqa4",
                      "rot-k3v3-d64-gqa4"),
    [](const auto &Info) {
      std::string Name = Info.param;
      std::replace(Name.begin(), Name.end(), '-', '_');
      return Name;
    });

} // namespace
