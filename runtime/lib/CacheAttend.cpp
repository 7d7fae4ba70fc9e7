//===- CacheAttend.cpp - Decode attention: plan splits, one launch --------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// One query per sequence of the batch, or several (chunked prefill,
// speculative verification): each query is a row of the `seqs` descriptor
// ([B][abi::SeqsFields::NumFields] u32: slot, tokens, the
// sink/quantized/window counts of keys and values, and their window rings'
// heads), and a query that sees a causal prefix of its sequence has its
// counts cut to that prefix (causalRow). The runtime splits the longest context
// into pieces (flash-decoding; their size planned per batch, see planSplits),
// launches the layer's `attend` kernel over (numSplits, Hkv, B), whose last
// block of each (b, kv-head) merges the splits (one launch per call), and
// copies the fp32 outputs back (host outputs only: device queries and outputs
// are read and written where they are, and nothing waits). In layers with OTT
// pools, a sequence's pool entries follow its tokens, so the splits cover
// tokens + entries.
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"

#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <array>

using namespace kvq::runtime;
namespace abi = kvq::abi;

namespace {

/// The shortest split planSplits chooses by itself (see planSplits). Timed
/// on an H200 (docs/Performance.md, "GPU: measured on an H200"): at batch 1, 4k
/// tokens 128-token splits beat 256-token ones by 10-22% (fp16, KIVI-2,
/// InnerQ-base), 64-token ones gain nothing more, and 32-token ones lose.
constexpr uint64_t kMinSplitTokens = 128;

/// The most queries one call attends: the launch's grid has one z index a
/// query, and CUDA's grids have at most 65535.
constexpr unsigned kMaxAttendRows = 65535;

uint64_t ceilDiv(uint64_t A, uint64_t B) { return (A + B - 1) / B; }
uint64_t roundUp(uint64_t A, uint64_t B) { return ceilDiv(A, B) * B; }

using SeqsRow = std::array<uint32_t, abi::SeqsFields::NumFields>;

/// The `seqs` descriptor row of one sequence.
SeqsRow descriptor(const SequenceState &S, unsigned Layer) {
  using F = abi::SeqsFields;
  const SliceCounts &C = S.Layers[Layer];
  SeqsRow Row;
  Row[F::Slot] = S.Slot;
  Row[F::Tokens] = C.Keys.total();
  Row[F::KSink] = C.Keys.Sink;
  Row[F::KQuantized] = C.Keys.Quantized;
  Row[F::KWindow] = C.Keys.Window;
  Row[F::VSink] = C.Values.Sink;
  Row[F::VQuantized] = C.Values.Quantized;
  Row[F::VWindow] = C.Values.Window;
  Row[F::KWindowHead] = S.WindowHead[int(Tensor::Keys)][Layer];
  Row[F::VWindowHead] = S.WindowHead[int(Tensor::Values)][Layer];
  return Row;
}

/// `Row` with each tensor's counts cut to its first `Visible` tokens: the
/// sink first, then the quantized tokens, then the window (its ring's head,
/// the oldest token, stays where it is).
SeqsRow causalRow(SeqsRow Row, uint32_t Visible) {
  using F = abi::SeqsFields;
  auto cut = [&](unsigned Sink, unsigned Quantized, unsigned Window) {
    uint32_t Left = Visible;
    for (unsigned Field : {Sink, Quantized, Window}) {
      Row[Field] = std::min(Row[Field], Left);
      Left -= Row[Field];
    }
  };
  cut(F::KSink, F::KQuantized, F::KWindow);
  cut(F::VSink, F::VQuantized, F::VWindow);
  Row[F::Tokens] = Visible;
  return Row;
}

} // namespace

Status Cache::Impl::attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                           const void *Q, float *Out, Memory Where,
                           SplitPlan Planned, QueryRope Query,
                           const std::vector<unsigned> &Queries) {
  if (Status S = checkLayer(Layer); !S.ok())
    return S;
  bool Rotate = Query == QueryRope::Unrotated;
  if (Rotate && !layout(Tensor::Keys).Layers[Layer].Scheme.PreRope)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: an unrotated query needs pre-RoPE keys; "
                         "layer " +
                             std::to_string(Layer) + "'s keys are not");
  if (!Queries.empty() && Queries.size() != Seqs.size())
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: " + std::to_string(Queries.size()) +
                             " query counts for " +
                             std::to_string(Seqs.size()) + " sequences");
  if (Seqs.empty())
    return Status::success();
  std::vector<uint32_t> Desc;
  uint32_t MaxTokens = 0;
  if (Status S = queryRows(Layer, Seqs, Queries, Desc, MaxTokens); !S.ok())
    return S;
  unsigned Batch = unsigned(Desc.size() / abi::SeqsFields::NumFields);
  if (Batch > kMaxAttendRows)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: " + std::to_string(Batch) +
                             " queries in one call; at most " +
                             std::to_string(kMaxAttendRows));
  if (!Q || !Out)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: null query or output");
  // The kernels read a query row 4 channels at a time.
  if (Where != Memory::Host && reinterpret_cast<uintptr_t>(Q) % 16)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: a device query must be 16-byte aligned");
  const ModelShape &M = manifest().Model;
  size_t QElems = size_t(Batch) * M.Heads * M.HeadDim;
  // A device query is not read back to be scanned (see validateItem).
  if (size_t Bad =
          Where == Memory::Host ? findNonFinite(M.Type, Q, QElems) : QElems;
      Bad != QElems)
    return Status::error(
        ErrorCode::InvalidArgument,
        "non-finite query value at query row " +
            std::to_string(Bad / (size_t(M.Heads) * M.HeadDim)) + ", head " +
            std::to_string(Bad / M.HeadDim % M.Heads) + ", channel " +
            std::to_string(Bad % M.HeadDim));
  // OTT pool entries follow a sequence's tokens (at most Entries of them).
  const PoolLayout &Pool = manifest().Pool;
  if (Pool.isTracked(Layer))
    MaxTokens += Pool.Entries;
  SplitPlan Splits = Planned;
  if (!Splits.Count) {
    Expected<SplitPlan> P = planSplits(MaxTokens, Batch);
    if (!P.ok())
      return P.status();
    Splits = *P;
  } else if (uint64_t(Splits.Count) * Splits.Tokens < MaxTokens) {
    // Splits past a sequence's end are empty: a plan may have more.
    return Status::error(
        ErrorCode::InvalidArgument,
        "attend plan covers " +
            std::to_string(uint64_t(Splits.Count) * Splits.Tokens) +
            " tokens; a sequence of the batch holds " +
            std::to_string(MaxTokens) + " in layer " + std::to_string(Layer) +
            ": plan again");
  }
  uint32_t NumSplits = Splits.Count;
  // Blocks prefetch their split where the grid runs in waves: their
  // requests then overlap other blocks' work (docs/Performance.md,
  // "GPU: measured on an H200").
  Expected<unsigned> Resident = residentAttendBlocks();
  if (!Resident.ok())
    return Resident.status();
  bool Waves = uint64_t(NumSplits) * M.KvHeads * Batch > *Resident;

  size_t QBytes = QElems * elemBytes();
  size_t PartialBytes =
      size_t(Batch) * M.Heads * NumSplits * (M.HeadDim + 2) * sizeof(float);
  size_t OutBytes = QElems * sizeof(float);
  bool OnHost = Where == Memory::Host;
  DevicePtr QAddr = DevicePtr(reinterpret_cast<uintptr_t>(Q));
  DevicePtr OutAddr = DevicePtr(reinterpret_cast<uintptr_t>(Out));
  Expected<DevicePtr> QDev = OnHost ? scratch(QBuf, QBytes) : QAddr;
  Expected<DevicePtr> PartialDev =
      QDev.ok() ? scratch(Partial, PartialBytes) : QDev;
  Expected<DevicePtr> SeqsDev =
      PartialDev.ok() ? scratch(SeqsBuf, Desc.size() * 4) : PartialDev;
  Expected<DevicePtr> OutDev =
      !SeqsDev.ok() ? SeqsDev : (OnHost ? scratch(OutBuf, OutBytes) : OutAddr);
  Expected<DevicePtr> ArrivalsDev =
      OutDev.ok() ? scratch(Arrivals, arrivalBytes(Batch), /*Zeroed=*/true)
                  : OutDev;
  if (!ArrivalsDev.ok())
    return ArrivalsDev.status();
  if (OnHost)
    if (Status S = B->copyToDevice(*QDev, Q, QBytes); !S.ok())
      return S;
  // Layers with equal counts (every layer, when each step appends all of
  // them) share the rows already on the device.
  if (Desc != SeqsOnDevice || *SeqsDev != SeqsOnDeviceAt) {
    SeqsOnDevice.clear();
    if (Status S = B->copyToDevice(*SeqsDev, Desc.data(), Desc.size() * 4);
        !S.ok())
      return S;
    SeqsOnDevice = Desc;
    SeqsOnDeviceAt = *SeqsDev;
  }

  const int K = int(Tensor::Keys), V = int(Tensor::Values);
  using A = abi::AttendArgs;
  abi::KernelArgs Attend(abi::KernelKind::Attend);
  Attend.set(A::Q, *QDev);
  Attend.set(A::Partial, *PartialDev);
  Attend.set(A::Out, *OutDev);
  Attend.set(A::Arrivals, *ArrivalsDev);
  Attend.set(A::Seqs, *SeqsDev);
  Attend.set(A::KPages,
             Pages[K] + layout(Tensor::Keys).Layers[Layer].Slice.Offset);
  Attend.set(A::VPages,
             Pages[V] + layout(Tensor::Values).Layers[Layer].Slice.Offset);
  Attend.set(A::KTables, Tables[K]);
  Attend.set(A::VTables, Tables[V]);
  Attend.set(A::KSink, sinkAddr(Tensor::Keys, Layer, 0));
  Attend.set(A::VSink, sinkAddr(Tensor::Values, Layer, 0));
  Attend.set(A::KWindow, windowAddr(Tensor::Keys, Layer, 0));
  Attend.set(A::VWindow, windowAddr(Tensor::Values, Layer, 0));
  Attend.set(A::Norms, normsAddr(Layer, 0));
  Attend.set(A::MaxPagesPerSeq, int32_t(MaxPagesPerSeq));
  Attend.set(A::NumSplits, int32_t(NumSplits));
  Attend.set(A::SplitTokens, int32_t(Splits.Tokens));
  // Layers without pools get a pointer their kernel never reads.
  bool Tracked = Pool.isTracked(Layer);
  Attend.set(A::KPool,
             Tracked ? poolEntriesAddr(Tensor::Keys, Layer, 0) : Norms);
  Attend.set(A::VPool,
             Tracked ? poolEntriesAddr(Tensor::Values, Layer, 0) : Norms);
  Attend.set(A::PoolIndex, Tracked ? poolIndexAddr(Layer, 0) : Norms);
  Attend.set(A::RotateQuery, int32_t(Rotate));
  Attend.set(A::PrefetchSplit, int32_t(Waves));
  Attend.set(A::TableRow, int32_t(manifest().Layers[Layer].AttendTableRow));
  if (Status S = launch(manifest().Layers[Layer].Attend,
                        Dim3{NumSplits, M.KvHeads, Batch}, Attend);
      !S.ok()) {
    // A launch that failed part-way may have left counters behind.
    (void)B->memset(*ArrivalsDev, 0, arrivalBytes(Batch));
    return S;
  }
  // copyToHost waits for the kernels (stream order); a device output is
  // left to the caller's stream.
  return OnHost ? B->copyToHost(Out, *OutDev, OutBytes) : Status::success();
}

Status Cache::Impl::queryRows(unsigned Layer,
                              const std::vector<SequenceId> &Seqs,
                              const std::vector<unsigned> &Queries,
                              std::vector<uint32_t> &Desc,
                              uint32_t &MaxTokens) {
  const PoolLayout &Pool = manifest().Pool;
  for (size_t I = 0; I < Seqs.size(); ++I) {
    Expected<SequenceState *> S = find(Seqs[I]);
    if (!S.ok())
      return S.status();
    SeqsRow Row = descriptor(**S, Layer);
    uint32_t Tokens = Row[abi::SeqsFields::Tokens];
    uint32_t Count = Queries.empty() ? 1 : Queries[I];
    if (!Queries.empty() && (Count == 0 || Count > Tokens))
      return Status::error(
          ErrorCode::InvalidArgument,
          "attend: sequence " + std::to_string(Seqs[I]) + " has " +
              std::to_string(Count) + " queries and " + std::to_string(Tokens) +
              " tokens in layer " + std::to_string(Layer) +
              "; each query attends up to its own token, the last " +
              std::to_string(Count) + " appended (1 to " +
              std::to_string(Tokens) + " queries)");
    for (uint32_t J = 0; J < Count; ++J) {
      SeqsRow Cut =
          Queries.empty() ? Row : causalRow(Row, Tokens - Count + 1 + J);
      // A pooled token's entry follows the tokens whatever its position:
      // the kernel cannot leave out the entries a query does not see.
      using F = abi::SeqsFields;
      if (Pool.isTracked(Layer) && (Cut[F::KQuantized] != Row[F::KQuantized] ||
                                    Cut[F::VQuantized] != Row[F::VQuantized]))
        return Status::error(
            ErrorCode::InvalidArgument,
            "attend: layer " + std::to_string(Layer) +
                " keeps OTT outlier pools, so each query must see every "
                "quantized token; query " +
                std::to_string(J) + " of sequence " + std::to_string(Seqs[I]) +
                " sees " + std::to_string(Cut[F::Tokens]) + " of its " +
                std::to_string(Tokens) + " tokens");
      Desc.insert(Desc.end(), Cut.begin(), Cut.end());
      MaxTokens = std::max(MaxTokens, Cut[F::Tokens]);
    }
  }
  return Status::success();
}

Expected<unsigned> Cache::Impl::residentAttendBlocks() {
  if (ResidentAttendBlocks)
    return ResidentAttendBlocks;
  unsigned Fewest = ~0u;
  for (const LayerKernels &L : manifest().Layers) {
    Expected<const KernelInfo *> K = kernelInfo(L.Attend);
    if (!K.ok())
      return K.status();
    Expected<unsigned> N =
        B->residentBlocks(L.Attend, (*K)->Block, (*K)->SharedBytes);
    if (!N.ok())
      return N.status();
    Fewest = std::min(Fewest, std::max(1u, *N));
  }
  ResidentAttendBlocks = Fewest;
  return Fewest;
}

Expected<SplitPlan> Cache::Impl::planSplits(uint64_t Longest, size_t Batch,
                                            uint32_t Pinned) {
  const Manifest &M = manifest();
  uint64_t Granule = M.SplitGranule;
  uint64_t Capacity = M.splitTokens(B->runsHostCode());
  uint64_t Tokens = Pinned;
  if (Pinned && (Pinned % Granule || Pinned > Capacity))
    return Status::error(ErrorCode::InvalidArgument,
                         "attend plan: a split of " + std::to_string(Pinned) +
                             " tokens; splits are multiples of " +
                             std::to_string(Granule) + " up to " +
                             std::to_string(Capacity) +
                             " (the manifest's split_granule and this "
                             "backend's split_tokens)");
  if (!Pinned) {
    // FlashInfer's split-kv planning: as many splits per (sequence, kv-head)
    // as keep every resident block busy, each at least kMinSplitTokens (a
    // split's fixed work: query, softmax, partial outputs) and at most the
    // kernels' capacity (long splits amortise that work).
    Expected<unsigned> Resident = residentAttendBlocks();
    if (!Resident.ok())
      return Resident.status();
    uint64_t Slots =
        std::max<uint64_t>(1, *Resident / (uint64_t(M.Model.KvHeads) * Batch));
    uint64_t Floor = std::min(Capacity, roundUp(kMinSplitTokens, Granule));
    Tokens =
        std::clamp(roundUp(ceilDiv(Longest, Slots), Granule), Floor, Capacity);
  }
  uint64_t Count = std::max<uint64_t>(1, ceilDiv(Longest, Tokens));
  if (Count * Tokens > 0x7fffffff)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend plan: " + std::to_string(Longest) +
                             " tokens exceed 2^31");
  return SplitPlan{uint32_t(Tokens), uint32_t(Count)};
}

Status Cache::Impl::reserveAttend(size_t Batch, uint32_t NumSplits) {
  const ModelShape &M = manifest().Model;
  size_t QElems = Batch * M.Heads * M.HeadDim;
  struct Need {
    ScratchBuffer *Buffer;
    size_t Bytes;
    bool Zeroed;
  };
  for (Need N :
       {Need{&QBuf, QElems * elemBytes(), false},
        Need{&Partial,
             Batch * M.Heads * NumSplits * (M.HeadDim + 2) * sizeof(float),
             false},
        Need{&SeqsBuf, Batch * sizeof(SeqsRow), false},
        Need{&OutBuf, QElems * sizeof(float), false},
        Need{&Arrivals, arrivalBytes(Batch), true}})
    if (Expected<DevicePtr> P = scratch(*N.Buffer, N.Bytes, N.Zeroed); !P.ok())
      return P.status();
  return Status::success();
}
