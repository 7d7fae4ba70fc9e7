//===- DeviceTrafficTest.cpp - Host-device traffic of a decode step -------===//
//
// Part of kvq, the runtime tests.
//
//===----------------------------------------------------------------------===//
//
// A decode step of a batch on the PTX interpreter-backed device moves only
// the new K/V, the query, the output and a few bytes of metadata per
// sequence between host and device, and waits for the device only when the
// caller asks (docs/KernelABI.md, "Host-device traffic"). The windows stay on
// the device as rings that the flush kernels read in place: no window row is
// copied, within the device or across it; only the new rows are written. The
// device-pointer variants move metadata only, on the caller's stream, and
// agree bit for bit with the host-pointer forms.
//
// KIVI-2 (kivi2-d64-gqa1): keys flush 128 tokens once their window holds
// 129, values flush one token per step past 130. After a 256-token prefill
// the next step flushes both, and the key flush opens a new page.
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"
#include "kvq/ABI/KernelABI.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace kvq;
using namespace kvq::runtime;

namespace {

constexpr unsigned kBatch = 3, kPrefill = 256;
/// Bytes of one sequence's `seqs` descriptor row.
constexpr size_t kSeqsRowBytes =
    kvq::abi::SeqsFields::NumFields * sizeof(uint32_t);

/// Records the stream each launch and copy was issued on, and each attend
/// launch's prefetchSplit argument. With StopAfterFirstSplit, a launch over
/// several splits (an attend) runs only the blocks of split 0 and fails, as
/// a launch stopped part-way would.
class StreamRecordingDriver : public ptx::InterpDriver {
public:
  void setStream(StreamHandle S) override { Current = S; }
  Expected<KernelHandle> getKernel(ModuleHandle Module,
                                   const std::string &Name) override {
    Expected<KernelHandle> K = InterpDriver::getKernel(Module, Name);
    if (K.ok() && Name.find("_attend_") != std::string::npos)
      AttendKernels.insert(K->Id);
    return K;
  }
  Status launch(KernelHandle K, Dim3 Grid, Dim3 Block, unsigned Shared,
                void **Args) override {
    Streams.push_back(Current);
    if (AttendKernels.count(K.Id))
      PrefetchFlags.push_back(
          *static_cast<int32_t *>(Args[kvq::abi::AttendArgs::PrefetchSplit]));
    if (!StopAfterFirstSplit || Grid.X < 2)
      return InterpDriver::launch(K, Grid, Block, Shared, Args);
    Status S =
        InterpDriver::launch(K, Dim3{1, Grid.Y, Grid.Z}, Block, Shared, Args);
    return S.ok() ? Status::error(ErrorCode::Backend, "launch stopped") : S;
  }
  bool StopAfterFirstSplit = false;
  Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) override {
    Streams.push_back(Current);
    return InterpDriver::copyToDevice(Dst, Src, Bytes);
  }
  Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) override {
    MemsetBytes.push_back(Bytes);
    return InterpDriver::memset(Dst, Value, Bytes);
  }
  /// The blocks the device runs at once, if set (the interpreter's modeled
  /// H100 otherwise).
  Expected<unsigned> residentBlocks(KernelHandle Kernel, Dim3 Block,
                                    unsigned Shared) override {
    if (Resident)
      return Resident;
    return InterpDriver::residentBlocks(Kernel, Block, Shared);
  }
  unsigned Resident = 0;
  StreamHandle Current = nullptr;
  std::vector<StreamHandle> Streams;
  std::set<uint64_t> AttendKernels;
  std::vector<int32_t> PrefetchFlags;
  /// The size of every memset, in order.
  std::vector<size_t> MemsetBytes;
};

struct Fixture {
  std::unique_ptr<Cache> C;
  StreamRecordingDriver *Driver = nullptr;
  std::vector<SequenceId> Seqs;
  size_t Row = 0, QRow = 0;
};

Fixture makeCache(bool Interpreter) {
  Fixture F;
  auto A = Artifact::open(KVQ_ARTIFACT_DIR_E2E_KIVI2_D64_GQA1);
  EXPECT_TRUE(A.ok()) << A.message();
  CacheOptions O;
  O.MaxSequences = kBatch;
  O.PagesPerTensor = 4 * kBatch;
  Expected<std::unique_ptr<Cache>> C = Status::error(ErrorCode::Backend, "");
  if (Interpreter) {
    auto D = std::make_unique<StreamRecordingDriver>();
    F.Driver = D.get();
    auto B = createDeviceBackend(**A, std::move(D), "sm_80");
    EXPECT_TRUE(B.ok()) << B.message();
    C = Cache::create(*A, O, std::move(*B));
  } else {
    C = Cache::create(*A, O);
  }
  EXPECT_TRUE(C.ok()) << C.message();
  F.C = std::move(*C);
  const ModelShape &M = F.C->manifest().Model;
  F.Row = size_t(M.KvHeads) * M.HeadDim * byteSize(M.Type);
  F.QRow = size_t(M.Heads) * M.HeadDim * byteSize(M.Type);
  for (unsigned I = 0; I < kBatch; ++I)
    F.Seqs.push_back(*F.C->addSequence());
  return F;
}

/// N random f16 values in [-2, 2).
std::vector<uint16_t> randomHalfs(size_t N, unsigned Seed) {
  std::mt19937 Rng(Seed);
  std::uniform_real_distribution<float> Dist(-2.0f, 2.0f);
  std::vector<float> F(N);
  for (float &X : F)
    X = Dist(Rng);
  std::vector<uint16_t> H(N);
  convertFromF32(DType::F16, F.data(), N, H.data());
  return H;
}

/// The tokens of one decode step (or a prefill): K and V per sequence.
struct StepData {
  std::vector<std::vector<uint16_t>> K, V;
  std::vector<uint16_t> Q;
};

StepData stepData(const Fixture &F, unsigned Tokens, unsigned Seed) {
  StepData D;
  for (unsigned I = 0; I < kBatch; ++I) {
    D.K.push_back(randomHalfs(Tokens * F.Row / 2, Seed * 31 + I));
    D.V.push_back(randomHalfs(Tokens * F.Row / 2, Seed * 37 + I));
  }
  D.Q = randomHalfs(kBatch * F.QRow / 2, Seed * 41);
  return D;
}

void appendHost(Fixture &F, unsigned Layer, const StepData &D,
                unsigned Tokens) {
  std::vector<AppendItem> Items;
  for (unsigned I = 0; I < kBatch; ++I)
    Items.push_back({F.Seqs[I], Tokens, D.K[I].data(), D.V[I].data()});
  ASSERT_TRUE(F.C->append(Layer, Items).ok());
}

unsigned pagesHeld(Fixture &F) {
  unsigned N = 0;
  for (SequenceId S : F.Seqs)
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      N += *F.C->numPages(T, S);
  return N;
}

/// Counters since Before.
TrafficCounters since(const TrafficCounters &Before, const Fixture &F) {
  const TrafficCounters &Now = F.C->backend().counters();
  TrafficCounters D;
  D.BytesToDevice = Now.BytesToDevice - Before.BytesToDevice;
  D.BytesToHost = Now.BytesToHost - Before.BytesToHost;
  D.BytesWithinDevice = Now.BytesWithinDevice - Before.BytesWithinDevice;
  D.Launches = Now.Launches - Before.Launches;
  D.Synchronizations = Now.Synchronizations - Before.Synchronizations;
  return D;
}

/// Prefills both layers of every sequence with kPrefill tokens.
void prefill(Fixture &F) {
  StepData P = stepData(F, kPrefill, 1);
  for (unsigned L = 0; L < 2; ++L)
    appendHost(F, L, P, kPrefill);
}

TEST(DeviceTrafficTest, HostDecodeStepMovesOnlyTokensQueryAndOutput) {
  Fixture F = makeCache(/*Interpreter=*/true);
  prefill(F);
  StepData D = stepData(F, 1, 2);
  const ModelShape &M = F.C->manifest().Model;
  size_t OutBytes = kBatch * size_t(M.Heads) * M.HeadDim * sizeof(float);
  TrafficCounters Before = F.C->backend().counters();
  unsigned PagesBefore = pagesHeld(F);
  std::vector<float> Out(OutBytes / sizeof(float));
  for (unsigned L = 0; L < 2; ++L) {
    appendHost(F, L, D, 1);
    ASSERT_TRUE(F.C->attend(L, F.Seqs, D.Q.data(), Out.data()).ok());
  }
  TrafficCounters T = since(Before, F);
  unsigned NewPages = pagesHeld(F) - PagesBefore;
  // Layer 0's key flush opened a page per sequence (pages hold every layer).
  EXPECT_EQ(NewPages, kBatch);
  // Per layer: K and V of one token and a query per sequence; once (both
  // layers hold the same counts): the descriptor rows; and the block-table
  // entry of each new page.
  size_t PerLayer = kBatch * (2 * F.Row + F.QRow);
  EXPECT_EQ(T.BytesToDevice, 2 * PerLayer + kBatch * kSeqsRowBytes +
                                 NewPages * sizeof(uint32_t));
  // Back: the outputs, nothing of the windows.
  EXPECT_EQ(T.BytesToHost, 2 * OutBytes);
  EXPECT_EQ(T.Synchronizations, 0u);
  // Per layer: a key flush and a value flush per sequence, and one attend
  // (its last blocks merge the splits).
  EXPECT_EQ(T.Launches, 2 * (2 * kBatch + 1));
  // The flushes read the windows in place and the new tokens went straight
  // to their ring rows: no copy within the device (staging the windows cost
  // 128 + 1 key and 129 + 129 value rows, in and back, per sequence and
  // layer before the rings).
  EXPECT_EQ(T.BytesWithinDevice, 0u);
}

/// Device buffers holding one step's K, V and Q, and room for the output.
struct DeviceStep {
  std::vector<DevicePtr> K, V;
  DevicePtr Q = 0, Out = 0;
};

DeviceStep upload(Fixture &F, const StepData &D, size_t OutBytes) {
  Backend &B = F.C->backend();
  DeviceStep S;
  auto Put = [&](const std::vector<uint16_t> &Data) {
    DevicePtr P = *B.allocate(Data.size() * 2);
    EXPECT_TRUE(B.copyToDevice(P, Data.data(), Data.size() * 2).ok());
    return P;
  };
  for (unsigned I = 0; I < kBatch; ++I) {
    S.K.push_back(Put(D.K[I]));
    S.V.push_back(Put(D.V[I]));
  }
  S.Q = Put(D.Q);
  S.Out = *B.allocate(OutBytes);
  return S;
}

/// Runs one decode step of both layers through the device-pointer API on
/// Stream and returns the outputs, [layer][B][Hq][D].
std::vector<float> deviceStep(Fixture &F, const DeviceStep &S,
                              StreamHandle Stream, TrafficCounters &Step) {
  const ModelShape &M = F.C->manifest().Model;
  size_t OutBytes = kBatch * size_t(M.Heads) * M.HeadDim * sizeof(float);
  std::vector<float> Out(2 * OutBytes / sizeof(float));
  for (unsigned L = 0; L < 2; ++L) {
    TrafficCounters Before = F.C->backend().counters();
    std::vector<DeviceAppendItem> Items;
    for (unsigned I = 0; I < kBatch; ++I)
      Items.push_back({F.Seqs[I], 1, S.K[I], S.V[I]});
    EXPECT_TRUE(F.C->appendDevice(L, Items, Stream).ok());
    EXPECT_TRUE(F.C->attendDevice(L, F.Seqs, S.Q, S.Out, Stream).ok());
    TrafficCounters T = since(Before, F);
    Step.BytesToDevice += T.BytesToDevice;
    Step.BytesToHost += T.BytesToHost;
    Step.BytesWithinDevice += T.BytesWithinDevice;
    Step.Synchronizations += T.Synchronizations;
    Step.Launches += T.Launches;
    EXPECT_TRUE(F.C->synchronize(Stream).ok());
    EXPECT_TRUE(F.C->backend()
                    .copyToHost(Out.data() + L * OutBytes / sizeof(float),
                                S.Out, OutBytes)
                    .ok());
  }
  return Out;
}

/// The same decode step through the host-pointer API: both layers'
/// outputs.
std::vector<float> hostStep(Fixture &Host, const StepData &D, size_t OutBytes) {
  std::vector<float> Out(2 * OutBytes / sizeof(float));
  for (unsigned L = 0; L < 2; ++L) {
    appendHost(Host, L, D, 1);
    Status S = Host.C->attend(L, Host.Seqs, D.Q.data(),
                              Out.data() + L * OutBytes / sizeof(float));
    EXPECT_TRUE(S.ok()) << S.message();
  }
  return Out;
}

TEST(DeviceTrafficTest, DeviceDecodeStepMovesOnlyMetadata) {
  Fixture Dev = makeCache(/*Interpreter=*/true);
  Fixture Host = makeCache(/*Interpreter=*/true);
  prefill(Dev);
  prefill(Host);
  StepData D = stepData(Dev, 1, 2);
  const ModelShape &M = Dev.C->manifest().Model;
  size_t OutBytes = kBatch * size_t(M.Heads) * M.HeadDim * sizeof(float);
  DeviceStep S = upload(Dev, D, OutBytes);

  auto *Stream = reinterpret_cast<StreamHandle>(uintptr_t(0x5eed));
  unsigned PagesBefore = pagesHeld(Dev);
  size_t RecordedBefore = Dev.Driver->Streams.size();
  TrafficCounters Step;
  std::vector<float> Out = deviceStep(Dev, S, Stream, Step);
  unsigned NewPages = pagesHeld(Dev) - PagesBefore;
  EXPECT_EQ(NewPages, kBatch);
  // Only descriptors (once for both layers) and new block-table entries
  // cross, and nothing waits.
  EXPECT_EQ(Step.BytesToDevice,
            kBatch * kSeqsRowBytes + NewPages * sizeof(uint32_t));
  EXPECT_EQ(Step.BytesToHost, 0u);
  // Within the device, only the new K and V rows are copied, from the
  // caller's tensors into their ring rows: no window row moves although
  // both tensors flush (staging cost 128 + 1 + 1 key and 129 + 1 + 129
  // value rows before the rings).
  EXPECT_EQ(Step.BytesWithinDevice, 2 * kBatch * 2 * Dev.Row);
  EXPECT_EQ(Step.Synchronizations, 0u);
  EXPECT_EQ(Step.Launches, 2 * (2 * kBatch + 1));
  // Every launch and upload went to the caller's stream; afterwards the
  // backend is back on the default stream.
  ASSERT_GT(Dev.Driver->Streams.size(), RecordedBefore);
  for (size_t I = RecordedBefore; I < Dev.Driver->Streams.size(); ++I)
    EXPECT_EQ(Dev.Driver->Streams[I], Stream) << I;
  EXPECT_EQ(Dev.Driver->Current, nullptr);

  // The same step through the host-pointer API: the same outputs and the
  // same windows, bit for bit.
  EXPECT_EQ(Out, hostStep(Host, D, OutBytes));
  for (unsigned I = 0; I < kBatch; ++I)
    for (unsigned L = 0; L < 2; ++L)
      for (Tensor T : {Tensor::Keys, Tensor::Values}) {
        EXPECT_EQ(*Dev.C->readWindow(T, Dev.Seqs[I], L),
                  *Host.C->readWindow(T, Host.Seqs[I], L));
        for (unsigned P = 0; P < *Dev.C->numPages(T, Dev.Seqs[I]); ++P)
          EXPECT_EQ(*Dev.C->readSlicePage(T, Dev.Seqs[I], L, 0, P),
                    *Host.C->readSlicePage(T, Host.Seqs[I], L, 0, P));
      }
}

TEST(DeviceTrafficTest, CpuBackendTakesHostMemoryAsDeviceMemory) {
  Fixture Dev = makeCache(/*Interpreter=*/false);
  Fixture Host = makeCache(/*Interpreter=*/false);
  prefill(Dev);
  prefill(Host);
  StepData D = stepData(Dev, 1, 3);
  const ModelShape &M = Dev.C->manifest().Model;
  size_t OutBytes = kBatch * size_t(M.Heads) * M.HeadDim * sizeof(float);
  TrafficCounters Step;
  std::vector<float> Out =
      deviceStep(Dev, upload(Dev, D, OutBytes), nullptr, Step);
  EXPECT_EQ(Out, hostStep(Host, D, OutBytes));
}

TEST(DeviceTrafficTest, BadDeviceBatchChangesNothing) {
  Fixture F = makeCache(/*Interpreter=*/true);
  prefill(F);
  StepData D = stepData(F, 1, 4);
  const ModelShape &M = F.C->manifest().Model;
  DeviceStep S =
      upload(F, D, kBatch * size_t(M.Heads) * M.HeadDim * sizeof(float));
  std::vector<uint8_t> Window = *F.C->readWindow(Tensor::Values, F.Seqs[0], 0);
  TrafficCounters Before = F.C->backend().counters();
  // The last item names an unknown sequence; the second has no values.
  std::vector<DeviceAppendItem> Unknown = {
      {F.Seqs[0], 1, S.K[0], S.V[0]}, {F.Seqs[2] + 100, 1, S.K[1], S.V[1]}};
  Status St = F.C->appendDevice(0, Unknown);
  EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
  std::vector<DeviceAppendItem> NoValues = {{F.Seqs[0], 1, S.K[0], S.V[0]},
                                            {F.Seqs[1], 1, S.K[1], 0}};
  St = F.C->appendDevice(0, NoValues);
  EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(St.message().find("null key or value"), std::string::npos)
      << St.message();
  EXPECT_EQ(F.C->attendDevice(2, F.Seqs, S.Q, S.Out).code(),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(F.C->attendDevice(0, F.Seqs, 0, S.Out).code(),
            ErrorCode::InvalidArgument);
  St = F.C->attendDevice(0, F.Seqs, S.Q + 8, S.Out);
  EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(St.message().find("16-byte aligned"), std::string::npos)
      << St.message();
  TrafficCounters T = since(Before, F);
  EXPECT_EQ(T.BytesToDevice + T.BytesToHost + T.BytesWithinDevice + T.Launches,
            0u);
  EXPECT_EQ(F.C->counts(F.Seqs[0], 0)->Values.total(), kPrefill);
  EXPECT_EQ(*F.C->readWindow(Tensor::Values, F.Seqs[0], 0), Window);
}

/// The planned split fills the backend's resident blocks within [128,
/// split_tokens] tokens, the capacity of the kernels the backend runs
/// (host.split_tokens on the CPU; docs/KernelABI.md, "Splits"); a pinned
/// one is checked.
TEST(DeviceTrafficTest, SplitsArePlannedForTheBackend) {
  for (bool Interpreter : {true, false}) {
    Fixture F = makeCache(Interpreter);
    prefill(F);
    const Manifest &M = F.C->manifest();
    const KernelInfo *K = M.kernel(M.Layers[0].Attend);
    ASSERT_TRUE(K);
    Expected<unsigned> Resident = F.C->backend().residentBlocks(
        M.Layers[0].Attend, K->Block, K->SharedBytes);
    ASSERT_TRUE(Resident.ok()) << Resident.message();
    // The interpreter models an H100 (132 SMs x 4 blocks of 128 threads);
    // the CPU backend runs one block per thread.
    EXPECT_EQ(*Resident, Interpreter ? 528u : F.C->options().Threads);
    // The capacities differ, so the plans below tell them apart.
    ASSERT_NE(M.HostSplitTokens, M.SplitTokens);
    uint64_t G = M.SplitGranule, Cap = M.splitTokens(/*OnHost=*/!Interpreter);
    uint64_t Floor = std::min(Cap, (128 + G - 1) / G * G);
    uint64_t Slots =
        std::max<uint64_t>(1, *Resident / (M.Model.KvHeads * kBatch));
    auto Splits = [](uint64_t T, uint64_t S) { return (T + S - 1) / S; };
    for (uint64_t T : {300u, 4096u, 32768u, 1u << 20}) {
      Expected<AttendPlan> P = F.C->planAttend(F.Seqs, unsigned(T));
      ASSERT_TRUE(P.ok()) << P.message();
      uint64_t S = P->Splits.Tokens;
      std::string Where = (Interpreter ? "interpreter, " : "cpu, ") +
                          std::to_string(T) + " tokens, splits of " +
                          std::to_string(S);
      EXPECT_EQ(S % G, 0u) << Where;
      EXPECT_GE(S, Floor) << Where;
      EXPECT_LE(S, Cap) << Where;
      EXPECT_EQ(P->Splits.Count, Splits(T, S)) << Where;
      // As short as fills the resident blocks, no shorter.
      if (S < Cap) {
        EXPECT_LE(Splits(T, S), Slots) << Where;
      }
      if (S > Floor) {
        EXPECT_GT(Splits(T, S - G), Slots) << Where;
      }
    }
    EXPECT_EQ(F.C->planAttend(F.Seqs, 1u << 20)->Splits.Tokens, Cap);

    Expected<AttendPlan> Pinned = F.C->planAttend(F.Seqs, 0, unsigned(G));
    ASSERT_TRUE(Pinned.ok()) << Pinned.message();
    EXPECT_EQ(Pinned->Splits.Tokens, G);
    EXPECT_EQ(Pinned->Splits.Count, Splits(kPrefill, G));
    for (uint64_t Bad : {G + 1, Cap + G}) {
      Expected<AttendPlan> P = F.C->planAttend(F.Seqs, 0, unsigned(Bad));
      ASSERT_FALSE(P.ok()) << Bad;
      EXPECT_EQ(P.status().code(), ErrorCode::InvalidArgument);
      EXPECT_NE(P.message().find("splits are multiples of"), std::string::npos)
          << P.message();
    }
  }
}

/// The blocks of an attend launch count themselves per (sequence, kv-head)
/// and the last resets the count (docs/KernelABI.md, "Merging the splits").
/// A launch that stopped after some blocks leaves counts behind; the
/// runtime clears them, so the next call merges every split again.
TEST(DeviceTrafficTest, AttendRecoversFromALaunchStoppedPartWay) {
  Fixture F = makeCache(/*Interpreter=*/true);
  prefill(F);
  unsigned Granule = F.C->manifest().SplitGranule;
  Expected<AttendPlan> Plan = F.C->planAttend(F.Seqs, 0, Granule);
  ASSERT_TRUE(Plan.ok()) << Plan.message();
  ASSERT_GE(Plan->Splits.Count, 2u);
  // Two queries: rows left by the first must not leak into the second's
  // outputs.
  std::vector<uint16_t> Q1 = stepData(F, 1, 11).Q, Q2 = stepData(F, 1, 12).Q;
  const ModelShape &M = F.C->manifest().Model;
  size_t Outputs = kBatch * M.Heads * M.HeadDim;
  std::vector<float> Expected(Outputs), Out(Outputs), After(Outputs, -1.0f);
  ASSERT_TRUE(F.C->attend(0, *Plan, Q2.data(), Expected.data()).ok());
  ASSERT_TRUE(F.C->attend(0, *Plan, Q1.data(), Out.data()).ok());
  EXPECT_NE(Out, Expected);
  F.Driver->StopAfterFirstSplit = true;
  EXPECT_EQ(F.C->attend(0, *Plan, Q1.data(), Out.data()).code(),
            ErrorCode::Backend);
  F.Driver->StopAfterFirstSplit = false;
  ASSERT_TRUE(F.C->attend(0, *Plan, Q2.data(), After.data()).ok());
  EXPECT_EQ(After, Expected);
}

/// Blocks prefetch their split only where the attend grid runs in waves
/// (more blocks than the device runs at once: here, one at a time). The
/// prefetches change no output and ask only for lines the kernel reads
/// (not the unwritten rest of a page): the launch's distinct sectors stay,
/// its sector requests grow.
TEST(DeviceTrafficTest, BlocksPrefetchTheirSplitOnlyInWaves) {
  std::vector<float> Outs[2];
  ptx::Counters Counts[2];
  for (bool Waves : {false, true}) {
    Fixture F = makeCache(/*Interpreter=*/true);
    if (Waves)
      F.Driver->Resident = 1;
    F.Driver->setCountDistinctSectors(true);
    // 71 quantized value tokens: the rest of their page is not read.
    appendHost(F, 0, stepData(F, 200, 1), 200);
    ASSERT_EQ(F.C->counts(F.Seqs[0], 0)->Values.Quantized, 71u);
    Expected<AttendPlan> Plan =
        F.C->planAttend(F.Seqs, 0, F.C->manifest().SplitGranule);
    ASSERT_TRUE(Plan.ok()) << Plan.message();
    const ModelShape &M = F.C->manifest().Model;
    std::vector<float> Out(kBatch * M.Heads * M.HeadDim);
    std::vector<uint16_t> Q = stepData(F, 1, 13).Q;
    ASSERT_TRUE(F.C->attend(0, *Plan, Q.data(), Out.data()).ok());
    ASSERT_EQ(F.Driver->PrefetchFlags.size(), 1u);
    EXPECT_EQ(F.Driver->PrefetchFlags[0], Waves ? 1 : 0);
    Counts[Waves] = F.Driver->lastCounters();
    Outs[Waves] = Out;
  }
  EXPECT_EQ(Outs[0], Outs[1]);
  EXPECT_EQ(Counts[1].GlobalDistinctSectors, Counts[0].GlobalDistinctSectors);
  EXPECT_GT(Counts[1].GlobalSectors, Counts[0].GlobalSectors);
}

TEST(DeviceTrafficTest, PlanServesEveryLayerAndStep) {
  Fixture Dev = makeCache(/*Interpreter=*/true);
  Fixture Host = makeCache(/*Interpreter=*/true);
  prefill(Dev);
  prefill(Host);
  Expected<AttendPlan> Plan = Dev.C->planAttend(Dev.Seqs, kPrefill + 2);
  ASSERT_TRUE(Plan.ok()) << Plan.message();
  unsigned Split = Plan->Splits.Tokens;
  EXPECT_EQ(Split % Dev.C->manifest().SplitGranule, 0u);
  EXPECT_LE(Split, Dev.C->manifest().SplitTokens);
  EXPECT_EQ(Plan->Splits.Count, (kPrefill + 2 + Split - 1) / Split);
  EXPECT_EQ(Plan->MaxTokens, Plan->Splits.Count * Split);
  const ModelShape &M = Dev.C->manifest().Model;
  size_t OutFloats = kBatch * size_t(M.Heads) * M.HeadDim;
  for (unsigned Step = 0; Step < 2; ++Step) {
    StepData D = stepData(Dev, 1, 10 + Step);
    TrafficCounters Before = Dev.C->backend().counters();
    unsigned PagesBefore = pagesHeld(Dev);
    for (unsigned L = 0; L < 2; ++L) {
      appendHost(Dev, L, D, 1);
      appendHost(Host, L, D, 1);
      std::vector<float> Out(OutFloats), Want(OutFloats);
      ASSERT_TRUE(Dev.C->attend(L, *Plan, D.Q.data(), Out.data()).ok());
      // A plan of this step's own, with the same split size.
      Expected<AttendPlan> Own = Host.C->planAttend(Host.Seqs, 0, Split);
      ASSERT_TRUE(Own.ok()) << Own.message();
      ASSERT_TRUE(Host.C->attend(L, *Own, D.Q.data(), Want.data()).ok());
      // The plan's extra splits are empty: the same outputs, bit for bit.
      EXPECT_EQ(Out, Want) << "step " << Step << ", layer " << L;
    }
    TrafficCounters T = since(Before, Dev);
    EXPECT_EQ(T.BytesToDevice, 2 * kBatch * (2 * Dev.Row + Dev.QRow) +
                                   kBatch * kSeqsRowBytes +
                                   (pagesHeld(Dev) - PagesBefore) * 4);
    EXPECT_EQ(T.Synchronizations, 0u);
  }

  // Past what the plan covers: refused before anything runs.
  unsigned Held = Dev.C->counts(Dev.Seqs[0], 0)->Keys.total();
  unsigned More = Plan->MaxTokens + 1 - Held;
  StepData Long = stepData(Dev, More, 20);
  ASSERT_TRUE(Dev.C
                  ->append(0, std::vector<AppendItem>{{Dev.Seqs[0], More,
                                                       Long.K[0].data(),
                                                       Long.V[0].data()}})
                  .ok());
  std::vector<float> Out(OutFloats, 7.0f);
  uint64_t Launches = Dev.C->backend().counters().Launches;
  Status St = Dev.C->attend(0, *Plan, Long.Q.data(), Out.data());
  EXPECT_EQ(St.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(St.message().find("plan again"), std::string::npos) << St.message();
  EXPECT_EQ(Dev.C->backend().counters().Launches, Launches);
  EXPECT_EQ(Out, std::vector<float>(OutFloats, 7.0f));
  // Layer 1 is still covered; a removed sequence is not.
  EXPECT_TRUE(Dev.C->attend(1, *Plan, Long.Q.data(), Out.data()).ok());
  ASSERT_TRUE(Dev.C->removeSequence(Dev.Seqs[2]).ok());
  EXPECT_EQ(Dev.C->attend(1, *Plan, Long.Q.data(), Out.data()).code(),
            ErrorCode::InvalidArgument);
}

/// A prefill clears the pages it takes by runs of consecutive pages, one
/// memset each (a fresh pool hands them out in order): on a GPU a memset
/// per page cost more than the flush (docs/Performance.md).
TEST(DeviceTrafficTest, PrefillClearsPagesByRuns) {
  Fixture F = makeCache(/*Interpreter=*/true);
  const Manifest &M = F.C->manifest();
  unsigned Tokens = 3 * M.PageTokens + 10;
  size_t Halfs = Tokens * F.Row / sizeof(uint16_t);
  std::vector<uint16_t> K = randomHalfs(Halfs, 1), V = randomHalfs(Halfs, 2);
  F.Driver->MemsetBytes.clear();
  ASSERT_TRUE(F.C->append(0, {{F.Seqs[0], Tokens, K.data(), V.data()}}).ok());
  const std::vector<size_t> &Sizes = F.Driver->MemsetBytes;
  auto Count = [&](size_t Bytes) {
    return std::count(Sizes.begin(), Sizes.end(), Bytes);
  };
  // Each tensor's new pages in one clear (keys and values may have pages
  // of one size), and no clear of a single page.
  std::map<size_t, long> Clears;
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    unsigned Pages = *F.C->numPages(T, F.Seqs[0]);
    ASSERT_GE(Pages, 2u) << toString(T);
    ++Clears[Pages * M.tensor(T).PageBytes];
    EXPECT_EQ(Count(M.tensor(T).PageBytes), 0) << toString(T);
  }
  for (auto [Bytes, Tensors] : Clears)
    EXPECT_EQ(Count(Bytes), Tensors) << "clears of " << Bytes << " bytes";
}

} // namespace
