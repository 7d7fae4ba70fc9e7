//===- CacheAppend.cpp - Appending tokens: sink, window, flush ------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// One append adds tokens to one layer of a batch of sequences. Per sequence
// and tensor (docs/Numerics.md, "Flush rule and regions"):
//   1. the first tokens up to the sink size go to the sink buffer;
//   2. x = window ++ remaining new tokens (w + r tokens);
//      f = (w + r >= W + U) ? (w + r - W) / U : 0 flush units;
//   3. pages covering quantized positions [0, Q + f*U) are allocated, the
//      `flush` kernel quantizes x[0 : f*U) to positions [Q, Q + f*U);
//   4. the window becomes x[f*U :].
// Windows and sinks stay on the device, and each window is a ring buffer of
// window_capacity rows (docs/KernelABI.md, "Window rings"): window token i
// is at ring row (head + i) mod capacity, with the head kept per sequence,
// layer and tensor here and passed to the kernels. x is never built: the
// flush reads its first min(f*U, w) tokens from the ring and the others
// from the new tokens (device input where it is, host input copied once to
// a device staging buffer); then the head moves past the flushed tokens
// and the new tokens the window keeps are copied into their ring rows (at
// most two copies each, around the wrap), after the flush in stream order
// since they may take the ring rows it read. No window row is copied.
// Host-device traffic is the new K/V, new block-table entries, and nothing
// else; no step waits for the device (one stream orders the reuse of the
// staging buffer).
// In layers with OTT pools, the `track` kernel updates the pools and
// replaces the tokens entering them, in the rings and in writable copies of
// the new tokens, before the two flushes.
// Key norms (key_norm layers) come from the first append of a sequence to
// the layer, computed by the `keynorm` kernel before any flush.
//
// Everything is validated before the first buffer is touched, with one
// exception that reads a prefill's host input once instead of twice: where
// the CPU's flushes read new tokens in place, they check them themselves
// (the flush ABI's nonFinite word) and every flush runs before any window
// is committed, so that a NaN or an infinity undoes them (appendChecked;
// docs/Reliability.md, "State is never half-changed").
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"
#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <set>

using namespace kvq::runtime;
namespace abi = kvq::abi;

AppendPlan kvq::runtime::planAppend(const TensorLayout &T,
                                    const TensorCounts &Before,
                                    unsigned NumTokens) {
  AppendPlan P;
  P.OldWindow = Before.Window;
  P.After = Before;
  if (Before.Sink < T.Sink)
    P.ToSink = std::min(T.Sink - Before.Sink, NumTokens);
  P.After.Sink += P.ToSink;
  unsigned Total = Before.Window + (NumTokens - P.ToSink);
  unsigned Units =
      Total >= T.Recent + T.Flush ? (Total - T.Recent) / T.Flush : 0;
  P.Flushed = Units * T.Flush;
  P.After.Quantized += P.Flushed;
  P.After.Window = Total - P.Flushed;
  return P;
}

std::array<RingRun, 2> kvq::runtime::ringRuns(unsigned Head, unsigned First,
                                              unsigned Count,
                                              unsigned Capacity) {
  assert(uint64_t(First) + Count <= Capacity && Head < std::max(Capacity, 1u));
  if (!Count)
    return {};
  unsigned Row = (uint64_t(Head) + First) % Capacity;
  unsigned Before = std::min(Count, Capacity - Row);
  return {RingRun{First, Row, Before},
          RingRun{First + Before, 0, Count - Before}};
}

namespace {

/// Tokens a flush quantizes that never enter the window: the first ones of
/// the new tokens past the sink, when the window holds fewer than Flushed.
unsigned inputTokens(const AppendPlan &Plan) {
  return Plan.Flushed > Plan.OldWindow ? Plan.Flushed - Plan.OldWindow : 0;
}

/// Describes the non-finite value at flat index I of [n][Hkv][D].
std::string describeNonFinite(const char *What, size_t I, const ModelShape &M,
                              SequenceId Seq) {
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  return std::string("non-finite ") + What + " at token " +
         std::to_string(I / Row) + ", kv-head " +
         std::to_string(I % Row / M.HeadDim) + ", channel " +
         std::to_string(I % M.HeadDim) + " of sequence " + std::to_string(Seq);
}

} // namespace

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

/// findNonFinite over the backend's host threads: a prefill's input is
/// read once more than the kernels read it, so the scan takes the
/// bandwidth of every thread, not one's.
size_t scanNonFinite(Backend &B, DType Type, const void *In, size_t N) {
  constexpr size_t Chunk = size_t(1) << 16;
  size_t ElementBytes = Type == DType::F32 ? 4 : 2;
  std::atomic<size_t> First{N};
  B.forEachOnHost((N + Chunk - 1) / Chunk, [&](uint64_t Index) {
    size_t Begin = Index * Chunk, Count = std::min(Chunk, N - Begin);
    const auto *At = static_cast<const uint8_t *>(In) + Begin * ElementBytes;
    size_t Bad = findNonFinite(Type, At, Count);
    if (Bad == Count)
      return;
    // The first bad element overall: the smallest chunk's first.
    size_t Seen = First.load();
    while (Begin + Bad < Seen &&
           !First.compare_exchange_weak(Seen, Begin + Bad))
      ;
  });
  return First.load();
}

/// Phase 0 (each chunk's maxima into the partials, a block a chunk) or
/// phase 1 (each kv-head's norms from them) of the key-norm kernel on the
/// keys at Src.
Status launchKeyNorm(Cache::Impl &C, unsigned Layer, const AppendWork &W,
                     DevicePtr Src, unsigned Phase) {
  unsigned Tokens = W.Item->NumTokens, Chunks = keyNormChunks(Tokens);
  using A = abi::KeyNormArgs;
  abi::KernelArgs Args(abi::KernelKind::KeyNorm);
  Args.set(A::Src, Src);
  Args.set(A::Norms, C.normsAddr(Layer, W.Seq->Slot));
  Args.set(A::Partials, C.KeyNormPartials);
  Args.set(A::NumTokens, int32_t(Tokens));
  Args.set(A::NumChunks, int32_t(Chunks));
  Args.set(A::Phase, int32_t(Phase));
  unsigned Blocks = Phase == 0 ? Chunks : C.manifest().Model.KvHeads;
  return C.launch(C.manifest().Layers[Layer].KeyNorm, Dim3{Blocks, 1, 1}, Args);
}

/// Validates the host keys of a first append to a key-norm layer on a
/// backend that reads host memory: phase 0 of the key-norm kernel reads
/// every key anyway, and its chunk maxima are non-finite exactly where a
/// key is (KeyNormKernel.cpp), so they replace a host scan, a pass over the
/// keys from memory. Only the partials scratch changes; the first bad key,
/// when there is one, is found by scanning the keys.
Status validateKeysByNorm(Cache::Impl &C, unsigned Layer, AppendWork &W) {
  const AppendItem &I = *W.Item;
  if (Status S = launchKeyNorm(C, Layer, W,
                               DevicePtr(reinterpret_cast<uintptr_t>(I.K)), 0);
      !S.ok())
    return S;
  const ModelShape &M = C.manifest().Model;
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  std::vector<float> Maxima(keyNormChunks(I.NumTokens) * Row);
  if (Status S = C.B->copyToHost(Maxima.data(), C.KeyNormPartials,
                                 Maxima.size() * sizeof(float));
      !S.ok())
    return S;
  if (findNonFinite(DType::F32, Maxima.data(), Maxima.size()) ==
      Maxima.size()) {
    W.MaximaReady = true;
    return Status::success();
  }
  size_t N = size_t(I.NumTokens) * Row;
  return Status::error(
      ErrorCode::InvalidArgument,
      describeNonFinite("key", scanNonFinite(*C.B, M.Type, I.K, N), M, I.Seq));
}

/// Checks an item's shape and pointers.
Status checkItem(const Cache::Impl &C, const AppendItem &I) {
  size_t Bytes = size_t(I.NumTokens) * C.rowBytes();
  if ((I.KBytes && I.KBytes != Bytes) || (I.VBytes && I.VBytes != Bytes))
    return Status::error(
        ErrorCode::InvalidArgument,
        wrongShape(I.Seq, I.NumTokens, I.KBytes, I.VBytes, Bytes, "bytes"));
  if (I.NumTokens && (!I.K || !I.V))
    return Status::error(ErrorCode::InvalidArgument,
                         "sequence " + std::to_string(I.Seq) +
                             ": null key or value data for " +
                             std::to_string(I.NumTokens) + " tokens");
  return Status::success();
}

/// Tokens [First, End) of an item's new keys or values.
struct TokenRange {
  unsigned First = 0, End = 0;
};

/// The new tokens of tensor T that its flush reads from the item's input
/// (the others go to the sink and the window).
TokenRange flushedInput(const AppendWork &W, Tensor T) {
  const AppendPlan &Plan = W.Plan[int(T)];
  return {Plan.ToSink, Plan.ToSink + inputTokens(Plan)};
}

/// Scans tensor T of an item's host input for NaN and infinity, except the
/// tokens `Skipped`.
Status scanTensor(Cache::Impl &C, const AppendWork &W, Tensor T,
                  TokenRange Skipped = {}) {
  const AppendItem &I = *W.Item;
  const ModelShape &M = C.manifest().Model;
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  const auto *In = static_cast<const uint8_t *>(T == Tensor::Keys ? I.K : I.V);
  for (TokenRange Run :
       {TokenRange{0, Skipped.First}, TokenRange{Skipped.End, I.NumTokens}}) {
    if (Run.First >= Run.End)
      continue;
    size_t N = size_t(Run.End - Run.First) * Row;
    size_t Bad = scanNonFinite(*C.B, M.Type, In + Run.First * C.rowBytes(), N);
    if (Bad != N)
      return Status::error(
          ErrorCode::InvalidArgument,
          describeNonFinite(T == Tensor::Keys ? "key" : "value",
                            Run.First * Row + Bad, M, I.Seq));
  }
  return Status::success();
}

/// Checks that an item's host input is finite: its keys through
/// validateKeysByNorm where `KeysByNorm`; where `FlushChecked`, all but
/// the tokens its flushes read, which the flushes check (appendChecked).
Status scanItem(Cache::Impl &C, unsigned Layer, AppendWork &W, bool KeysByNorm,
                bool FlushChecked) {
  if (!W.Item->NumTokens)
    return Status::success();
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    Status S =
        T == Tensor::Keys && KeysByNorm
            ? validateKeysByNorm(C, Layer, W)
            : scanTensor(C, W, T,
                         FlushChecked ? flushedInput(W, T) : TokenRange{});
    if (!S.ok())
      return S;
  }
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

namespace {

/// Copies Bytes of an item's K or V (host or device memory) to Dst.
Status copyInput(Cache::Impl &C, DevicePtr Dst, const uint8_t *Src,
                 size_t Bytes, Cache::Impl::Memory Inputs) {
  if (Inputs == Cache::Impl::Memory::Host)
    return C.B->copyToDevice(Dst, Src, Bytes);
  return C.B->copyWithin(Dst, DevicePtr(reinterpret_cast<uintptr_t>(Src)),
                         Bytes);
}

/// Grows the sequence's block-table row of tensor T to Needed pages: takes
/// free pages, clears them and uploads the new table entries.
Status ensurePages(Cache::Impl &C, SequenceState &S, Tensor T,
                   unsigned Needed) {
  std::vector<uint32_t> &Pages = S.Pages[int(T)];
  size_t First = Pages.size();
  if (Needed <= First)
    return Status::success();
  while (Pages.size() < Needed)
    Pages.push_back(C.takePage(T, S));
  // Cleared by runs of consecutive pages, one memset each: a prefill takes
  // hundreds of pages, mostly in order, and a launch per page cost a GPU
  // more than the flush (docs/Performance.md, "GPU: measured on an H200").
  size_t PageBytes = C.layout(T).PageBytes;
  for (size_t Run = First; Run < Needed;) {
    size_t End = Run + 1;
    while (End < Needed && Pages[End] == Pages[End - 1] + 1)
      ++End;
    if (Status St =
            C.B->memset(C.pageAddr(T, Pages[Run]), 0, (End - Run) * PageBytes);
        !St.ok())
      return St;
    Run = End;
  }
  return C.B->copyToDevice(C.tableAddr(T, S.Slot) + First * sizeof(uint32_t),
                           Pages.data() + First,
                           (Needed - First) * sizeof(uint32_t));
}

Status runKeyNorm(Cache::Impl &C, unsigned Layer, const AppendWork &W,
                  Cache::Impl::Memory Inputs) {
  // Device keys are read where they are; host keys through the key staging
  // buffer (reserved), which the key flush after it reuses in stream order.
  DevicePtr Src = DevicePtr(reinterpret_cast<uintptr_t>(W.Item->K));
  if (!W.MaximaReady) {
    if (Inputs == Cache::Impl::Memory::Host && !C.B->readsHostMemory()) {
      Src = C.Staging[0].Ptr;
      if (Status S = C.B->copyToDevice(Src, W.Item->K,
                                       W.Item->NumTokens * C.rowBytes());
          !S.ok())
        return S;
    }
    if (Status S = launchKeyNorm(C, Layer, W, Src, 0); !S.ok())
      return S;
  }
  if (Status S = launchKeyNorm(C, Layer, W, Src, 1); !S.ok())
    return S;
  W.Seq->HasNorms[Layer] = true;
  return Status::success();
}

/// Where a flush reads its first inputTokens(Plan) tokens of Rest: device
/// input, and host input on a backend that reads host memory (the CPU),
/// where it is; other host input (or input the track kernel would rewrite:
/// Writable) copied once to the tensor's staging buffer. 0 when the window
/// holds every flushed token.
Expected<DevicePtr> flushInput(Cache::Impl &C, Tensor T, const AppendPlan &Plan,
                               const uint8_t *Rest, Cache::Impl::Memory Inputs,
                               bool Writable) {
  unsigned N = inputTokens(Plan);
  if (!N)
    return DevicePtr(0);
  bool InPlace =
      Inputs == Cache::Impl::Memory::Device || C.B->readsHostMemory();
  if (InPlace && !Writable)
    return DevicePtr(reinterpret_cast<uintptr_t>(Rest));
  // Reserved by reserveAppend: no allocation here.
  DevicePtr Staging = C.Staging[int(T)].Ptr;
  assert(C.Staging[int(T)].Bytes >= N * C.rowBytes());
  if (Status St = copyInput(C, Staging, Rest, N * C.rowBytes(), Inputs);
      !St.ok())
    return St;
  return Staging;
}

/// Copies the sink's share of the new tokens of tensor T, makes the pages
/// a flush writes private and present, and returns where the flush reads
/// the tokens the window does not hold (flushInput).
Expected<DevicePtr> prepareTensor(Cache::Impl &C, unsigned Layer, Tensor T,
                                  const AppendWork &W,
                                  Cache::Impl::Memory Inputs, bool Writable) {
  const AppendPlan &Plan = W.Plan[int(T)];
  SequenceState &S = *W.Seq;
  size_t Row = C.rowBytes();
  const auto *New =
      static_cast<const uint8_t *>(T == Tensor::Keys ? W.Item->K : W.Item->V);
  if (Plan.ToSink)
    if (Status St = copyInput(
            C, C.sinkAddr(T, Layer, S.Slot) + S.Layers[Layer][T].Sink * Row,
            New, Plan.ToSink * Row, Inputs);
        !St.ok())
      return St;
  if (!Plan.Flushed)
    return DevicePtr(0);
  if (Status St = C.unsharePages(S, T, Plan); !St.ok())
    return St;
  if (Status St = ensurePages(
          C, S, T, pagesFor(Plan.After.Quantized, C.manifest().PageTokens));
      !St.ok())
    return St;
  return flushInput(C, T, Plan, New + Plan.ToSink * Row, Inputs, Writable);
}

/// Quantizes the Plan.Flushed oldest tokens of window ++ new tokens in
/// place: the window's from its ring, the rest from Input.
Status flushInPlace(Cache::Impl &C, unsigned Layer, Tensor T,
                    const SequenceState &S, const AppendPlan &Plan,
                    DevicePtr Input) {
  const TensorLayout &TL = C.layout(T);
  const LayerLayout &LL = TL.Layers[Layer];
  unsigned Destination = Plan.After.Quantized - Plan.Flushed;
  using A = abi::FlushArgs;
  abi::KernelArgs Args(abi::KernelKind::Flush);
  Args.set(A::Window, C.windowAddr(T, Layer, S.Slot));
  Args.set(A::Input, Input);
  Args.set(A::Pages, C.Pages[int(T)] + LL.Slice.Offset);
  Args.set(A::Table, C.tableAddr(T, S.Slot));
  Args.set(A::Norms, C.normsAddr(Layer, S.Slot));
  Args.set(A::Saturated, C.saturatedAddr(T, Layer));
  Args.set(A::NonFinite, C.NonFinite);
  Args.set(A::WindowHead, int32_t(S.WindowHead[int(T)][Layer]));
  Args.set(A::WindowTokens, int32_t(Plan.Flushed - inputTokens(Plan)));
  Args.set(A::DestPos, int32_t(Destination));
  Args.set(A::NumTokens, int32_t(Plan.Flushed));
  Args.set(A::TableRow, int32_t(LL.FlushTableRow));
  // A block of the GPU kernel moves FlushDeviceUnits flush units; a block
  // of the host code moves one.
  unsigned Units = Plan.Flushed / TL.Flush;
  unsigned PerBlock = C.B->runsHostCode() ? 1 : LL.FlushDeviceUnits;
  return C.launch(
      LL.FlushKernel,
      Dim3{(Units + PerBlock - 1) / PerBlock, C.manifest().Model.KvHeads, 1},
      Args);
}

/// After the flush (in stream order: the new rows may take the ring rows it
/// read), drops the flushed tokens from the window by moving its head and
/// writes the new tokens the window keeps into their ring rows.
Status commitWindow(Cache::Impl &C, unsigned Layer, Tensor T,
                    const AppendWork &W, Cache::Impl::Memory Inputs) {
  const AppendPlan &Plan = W.Plan[int(T)];
  SequenceState &S = *W.Seq;
  unsigned Capacity = C.layout(T).WindowCapacity;
  uint32_t &Head = S.WindowHead[int(T)][Layer];
  uint32_t OldHead = Head;
  if (Capacity)
    Head = uint32_t((uint64_t(Head) + Plan.Flushed) % Capacity);
  unsigned Skipped = Plan.ToSink + inputTokens(Plan);
  unsigned Kept = W.Item->NumTokens - Skipped;
  const auto *New =
      static_cast<const uint8_t *>(T == Tensor::Keys ? W.Item->K : W.Item->V);
  const uint8_t *Src = New + Skipped * C.rowBytes();
  // The kept new tokens are the window's last ones, after the move.
  Status St =
      C.forWindowRuns(T, Layer, S, Plan.After.Window - Kept, Kept,
                      [&](DevicePtr Ring, size_t Offset, size_t Bytes) {
                        return copyInput(C, Ring, Src + Offset, Bytes, Inputs);
                      });
  if (!St.ok()) {
    // A device failure: the head keeps agreeing with the counts.
    Head = OldHead;
    return St;
  }
  S.Layers[Layer][T] = Plan.After;
  return Status::success();
}

/// Copies tensor T's sink share and quantizes its flushed tokens; the window
/// is not committed yet.
Status flushTensor(Cache::Impl &C, unsigned Layer, Tensor T,
                   const AppendWork &W, Cache::Impl::Memory Inputs) {
  Expected<DevicePtr> Input =
      prepareTensor(C, Layer, T, W, Inputs, /*Writable=*/false);
  if (!Input.ok())
    return Input.status();
  if (!W.Plan[int(T)].Flushed)
    return Status::success();
  return flushInPlace(C, Layer, T, *W.Seq, W.Plan[int(T)], *Input);
}

Status appendTensor(Cache::Impl &C, unsigned Layer, Tensor T,
                    const AppendWork &W, Cache::Impl::Memory Inputs) {
  if (Status St = flushTensor(C, Layer, T, W, Inputs); !St.ok())
    return St;
  return commitWindow(C, Layer, T, W, Inputs);
}

/// A flushing append to a layer with OTT pools: keys and values flush the
/// same tokens (the manifest guarantees equal windows, so their rings have
/// one head); the `track` kernel updates the pools and replaces the tokens
/// entering them where the flushes read them (ring rows and writable
/// inputs), then both are quantized.
Status appendTracked(Cache::Impl &C, unsigned Layer, const AppendWork &W,
                     Cache::Impl::Memory Inputs) {
  DevicePtr Input[2] = {0, 0};
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    Expected<DevicePtr> Dev =
        prepareTensor(C, Layer, T, W, Inputs, /*Writable=*/true);
    if (!Dev.ok())
      return Dev.status();
    Input[int(T)] = *Dev;
  }
  const AppendPlan &Plan = W.Plan[int(Tensor::Keys)];
  const SequenceState &S = *W.Seq;
  assert(S.WindowHead[0][Layer] == S.WindowHead[1][Layer]);
  using A = abi::TrackArgs;
  abi::KernelArgs Args(abi::KernelKind::Track);
  Args.set(A::KWindow, C.windowAddr(Tensor::Keys, Layer, S.Slot));
  Args.set(A::VWindow, C.windowAddr(Tensor::Values, Layer, S.Slot));
  Args.set(A::KInput, Input[0]);
  Args.set(A::VInput, Input[1]);
  Args.set(A::KPool, C.poolEntriesAddr(Tensor::Keys, Layer, S.Slot));
  Args.set(A::VPool, C.poolEntriesAddr(Tensor::Values, Layer, S.Slot));
  Args.set(A::PoolIndex, C.poolIndexAddr(Layer, S.Slot));
  Args.set(A::WindowHead, int32_t(S.WindowHead[0][Layer]));
  Args.set(A::WindowTokens, int32_t(Plan.Flushed - inputTokens(Plan)));
  Args.set(A::FirstPos,
           int32_t(Plan.After.Sink + Plan.After.Quantized - Plan.Flushed));
  Args.set(A::NumTokens, int32_t(Plan.Flushed));
  if (Status St = C.launch(C.manifest().Layers[Layer].Track,
                           Dim3{C.manifest().Model.KvHeads, 1, 1}, Args);
      !St.ok())
    return St;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status St = flushInPlace(C, Layer, T, S, W.Plan[int(T)], Input[int(T)]);
        !St.ok())
      return St;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status St = commitWindow(C, Layer, T, W, Inputs); !St.ok())
      return St;
  return Status::success();
}

/// What the flush of one tensor of an append writes, kept so that it can be
/// undone: the layer's slices of logical pages [FirstPage, EndPage), of
/// which those from PagesBefore on are new. Slots a sequence has not
/// quantized are zero in every layer (pages are cleared when taken), so
/// the pages the flush starts are cleared again; the one it continues, a
/// mix of both, is kept.
struct FlushUndo {
  SequenceState *Seq;
  Tensor T;
  unsigned FirstPage, EndPage;
  size_t PagesBefore;
  /// The layer's slices of page FirstPage where the flush continues it.
  std::vector<uint8_t> Continued;
};
struct AppendUndo {
  std::vector<FlushUndo> Flushes;
  uint32_t Saturated[2] = {0, 0};
};

/// The bytes of a page that hold Layer's slices, one per kv-head.
size_t layerBytes(const Cache::Impl &C, Tensor T, unsigned Layer) {
  return size_t(C.manifest().Model.KvHeads) *
         C.layout(T).Layers[Layer].Slice.SliceBytes;
}

/// Whether the flush of Plan starts inside a page the sequence holds.
bool flushContinuesPage(const AppendPlan &Plan, unsigned PageTokens) {
  return Plan.Flushed && (Plan.After.Quantized - Plan.Flushed) % PageTokens;
}

/// Where Layer's slices start in logical page I of S.
DevicePtr layerAddr(const Cache::Impl &C, const SequenceState &S, Tensor T,
                    unsigned Layer, unsigned I) {
  return C.pageAddr(T, S.Pages[int(T)][I]) +
         C.layout(T).Layers[Layer].Slice.Offset;
}

/// Records what the flushes of `Works` will change (no page is shared:
/// appendChecked's condition).
Status recordUndo(Cache::Impl &C, unsigned Layer,
                  const std::vector<AppendWork> &Works, AppendUndo &U) {
  unsigned PageTokens = C.manifest().PageTokens;
  for (const AppendWork &W : Works)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const AppendPlan &Plan = W.Plan[int(T)];
      if (!Plan.Flushed)
        continue;
      unsigned Dest = Plan.After.Quantized - Plan.Flushed;
      FlushUndo &F = U.Flushes.emplace_back(
          FlushUndo{W.Seq,
                    T,
                    Dest / PageTokens,
                    pagesFor(Plan.After.Quantized, PageTokens),
                    W.Seq->Pages[int(T)].size(),
                    {}});
      if (!flushContinuesPage(Plan, PageTokens))
        continue;
      F.Continued.resize(layerBytes(C, T, Layer));
      if (Status S = C.B->copyToHost(
              F.Continued.data(), layerAddr(C, *W.Seq, T, Layer, F.FirstPage),
              F.Continued.size());
          !S.ok())
        return S;
    }
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status S = C.B->copyToHost(&U.Saturated[int(T)],
                                   C.saturatedAddr(T, Layer), sizeof(uint32_t));
        !S.ok())
      return S;
  return Status::success();
}

/// Undoes the key norms and flushes of `Works` (their windows are not
/// committed yet): the pages written restored, the new ones given back
/// (last taken first), the counters restored.
Status undoFlushes(Cache::Impl &C, unsigned Layer,
                   const std::vector<AppendWork> &Works, const AppendUndo &U) {
  for (auto It = U.Flushes.rbegin(); It != U.Flushes.rend(); ++It) {
    const FlushUndo &F = *It;
    std::vector<uint32_t> &Pages = F.Seq->Pages[int(F.T)];
    for (unsigned I = F.EndPage; I-- > F.FirstPage;) {
      DevicePtr At = layerAddr(C, *F.Seq, F.T, Layer, I);
      Status S =
          I == F.FirstPage && !F.Continued.empty()
              ? C.B->copyToDevice(At, F.Continued.data(), F.Continued.size())
              : C.B->memset(At, 0, layerBytes(C, F.T, Layer));
      if (!S.ok())
        return S;
      if (I < F.PagesBefore)
        continue;
      assert(I + 1 == Pages.size() && "new pages are the last ones");
      C.returnPage(F.T, *F.Seq, Pages.back());
      Pages.pop_back();
    }
  }
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status S = C.B->copyToDevice(C.saturatedAddr(T, Layer),
                                     &U.Saturated[int(T)], sizeof(uint32_t));
        !S.ok())
      return S;
  for (const AppendWork &W : Works)
    if (W.KeyNorm)
      W.Seq->HasNorms[Layer] = false;
  return Status::success();
}

/// Runs the key norms and flushes of `Works`; Bad: whether a flush read a
/// non-finite token.
Status flushAll(Cache::Impl &C, unsigned Layer,
                const std::vector<AppendWork> &Works,
                Cache::Impl::Memory Inputs, bool &Bad) {
  if (Status S = C.B->memset(C.NonFinite, 0, sizeof(uint32_t)); !S.ok())
    return S;
  for (const AppendWork &W : Works) {
    if (W.KeyNorm)
      if (Status S = runKeyNorm(C, Layer, W, Inputs); !S.ok())
        return S;
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      if (Status S = flushTensor(C, Layer, T, W, Inputs); !S.ok())
        return S;
  }
  uint32_t Flag = 0;
  if (Status S = C.B->copyToHost(&Flag, C.NonFinite, sizeof(uint32_t)); !S.ok())
    return S;
  Bad = Flag != 0;
  return Status::success();
}

/// Pass 2 where the flushes check the host input they read in place (pass
/// 1 scanned the rest): every item's key norms and flushes run first; where
/// a flush found a NaN or an infinity they are undone and the first bad
/// value named, else the windows are committed. The input is read from
/// memory once, by the flushes, where a scan before them read it twice.
Status appendChecked(Cache::Impl &C, unsigned Layer,
                     const std::vector<AppendWork> &Works,
                     Cache::Impl::Memory Inputs, bool &Unchanged) {
  AppendUndo Undo;
  Unchanged = true;
  if (Status S = recordUndo(C, Layer, Works, Undo); !S.ok())
    return S;
  Unchanged = false;
  bool Bad = false;
  if (Status S = flushAll(C, Layer, Works, Inputs, Bad); !S.ok() || Bad) {
    if (Status U = undoFlushes(C, Layer, Works, Undo); !U.ok())
      return U;
    Unchanged = true;
    if (!S.ok())
      return S;
    for (const AppendWork &W : Works)
      for (Tensor T : {Tensor::Keys, Tensor::Values})
        if (Status Scan = scanTensor(C, W, T); !Scan.ok())
          return Scan;
    return Status::error(ErrorCode::Backend,
                         "a flush reported a non-finite input value that "
                         "the host scan does not find");
  }
  for (const AppendWork &W : Works)
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      if (Status S = commitWindow(C, Layer, T, W, Inputs); !S.ok())
        return S;
  return Status::success();
}

/// Whether appendChecked costs less than scanning the input its flushes
/// read before them: the scan reads that input once more, the undo record
/// copies (reads and writes) the layer's slices of every page a flush
/// continues. A prefill's flushes read far more than a page; a decode
/// step's read a token or none (window tokens were checked when they came)
/// and may continue a page of 256 KiB (fp16, 128 tokens).
bool checkingInFlushesPays(const Cache::Impl &C, unsigned Layer,
                           const std::vector<AppendWork> &Works) {
  unsigned PageTokens = C.manifest().PageTokens;
  size_t Scanned = 0, Copied = 0;
  for (const AppendWork &W : Works)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const AppendPlan &Plan = W.Plan[int(T)];
      Scanned += size_t(inputTokens(Plan)) * C.rowBytes();
      if (flushContinuesPage(Plan, PageTokens))
        Copied += layerBytes(C, T, Layer);
    }
  return Scanned > 2 * Copied;
}

} // namespace

/// A code-sharing layer's kernels read its owner layer's codes: an append
/// may not take it past the tokens its owner holds (append the owner
/// first). Every layer of a tensor flushes by the same rule, so the owner
/// has then quantized every token the sharing layer has, and attending either
/// layer reads only written codes.
Status Cache::Impl::checkSharingOrder(const SequenceState &S, unsigned Layer,
                                      const AppendItem &I) const {
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    int Owner = int(layout(T).Layers[Layer].Slice.CodesFrom);
    if (Owner < 0)
      continue;
    uint64_t After = uint64_t(S.Layers[Layer][T].total()) + I.NumTokens;
    unsigned OwnerTokens = S.Layers[Owner][T].total();
    if (After > OwnerTokens)
      return Status::error(
          ErrorCode::InvalidArgument,
          "sequence " + std::to_string(I.Seq) + ": layer " +
              std::to_string(Layer) + " reuses the " + toString(T) +
              " codes of layer " + std::to_string(Owner) + ", which holds " +
              std::to_string(OwnerTokens) + " tokens; append layer " +
              std::to_string(Owner) + " first (this append would reach " +
              std::to_string(After) + ")");
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Cache::Impl::append
//===----------------------------------------------------------------------===//

Status Cache::Impl::append(unsigned Layer, const std::vector<AppendItem> &Batch,
                           Memory Inputs) {
  if (Status S = checkLayer(Layer); !S.ok())
    return S;
  // Pass 1: validate the whole batch and plan it (allocations here fail
  // before anything changes: Cache::append turns bad_alloc into a status).
  std::vector<AppendWork> Works;
  std::set<SequenceId> Seen;
  size_t NewPages[2] = {0, 0};
  SharedWrites Shared[2];
  bool LayerKeyNorm = !manifest().Layers[Layer].KeyNorm.empty();
  for (const AppendItem &I : Batch) {
    Expected<SequenceState *> S = find(I.Seq);
    if (!S.ok())
      return S.status();
    if (!Seen.insert(I.Seq).second)
      return Status::error(ErrorCode::InvalidArgument,
                           "sequence " + std::to_string(I.Seq) +
                               " appears twice in one append");
    if (Status St = checkItem(*this, I); !St.ok())
      return St;
    AppendWork W{*S, &I, {}, false};
    W.KeyNorm = LayerKeyNorm && I.NumTokens && !(*S)->HasNorms[Layer];
    if ((*S)->Layers[Layer].Keys.total() + uint64_t(I.NumTokens) > 0x7fffffff)
      return Status::error(ErrorCode::Capacity,
                           "sequence " + std::to_string(I.Seq) +
                               " would exceed 2^31 tokens");
    if (Status St = checkSharingOrder(**S, Layer, I); !St.ok())
      return St;
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      W.Plan[int(T)] =
          planAppend(layout(T), (*S)->Layers[Layer][T], I.NumTokens);
      unsigned Needed =
          pagesFor(W.Plan[int(T)].After.Quantized, manifest().PageTokens);
      if (Needed > MaxPagesPerSeq)
        return Status::error(ErrorCode::Capacity,
                             "sequence " + std::to_string(I.Seq) +
                                 " would need " + std::to_string(Needed) + " " +
                                 toString(T) + " pages; a sequence may hold " +
                                 std::to_string(MaxPagesPerSeq));
      size_t Have = (*S)->Pages[int(T)].size();
      if (engineAllocates() && Needed > Have + (*S)->Assigned[int(T)].size())
        return Status::error(
            ErrorCode::Capacity,
            "sequence " + std::to_string(I.Seq) + " would need " +
                std::to_string(Needed) + " " + toString(T) +
                " pages; the engine has assigned it " +
                std::to_string(Have + (*S)->Assigned[int(T)].size()) +
                " (setBlockTables)");
      NewPages[int(T)] += Needed > Have ? Needed - Have : 0;
      noteSharedWrites(**S, T, W.Plan[int(T)], Shared[int(T)]);
    }
    Works.push_back(W);
  }
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    NewPages[int(T)] += copiesNeeded(T, Shared[int(T)]);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (!engineAllocates() && NewPages[int(T)] > FreePages[int(T)].size())
      return Status::error(
          ErrorCode::Capacity,
          std::string("out of ") + toString(T) + " pages: the append needs " +
              std::to_string(NewPages[int(T)]) + " more, " +
              std::to_string(FreePages[int(T)].size()) + " are free");

  // Host input is scanned; device input is the engine's tensors, and
  // reading it back to scan it would cost the traffic the device path
  // exists to avoid. Where the kernels read host input in place, the
  // flushes check what they read themselves (appendChecked) where that
  // costs less than a scan first and their writes can be undone: not a
  // track kernel's (rings, pools) nor copies of pages shared with a fork.
  bool InPlace = Inputs == Memory::Host && B->readsHostMemory();
  bool FlushChecked = InPlace && !manifest().Pool.isTracked(Layer) &&
                      Shared[0].empty() && Shared[1].empty() &&
                      checkingInFlushesPays(*this, Layer, Works);
  if (Inputs == Memory::Host)
    for (AppendWork &W : Works) {
      // One item: its maxima stay in the partials until pass 2 (another
      // item's key norms would overwrite them).
      bool KeysByNorm = W.KeyNorm && Batch.size() == 1 && InPlace;
      if (Status St = scanItem(*this, Layer, W, KeysByNorm, FlushChecked);
          !St.ok())
        return St;
    }

  // Everything pass 2 needs is allocated before it changes anything.
  if (Status S = reserveAppend(Layer, Works, Inputs); !S.ok())
    return S;

  // Pass 2: apply it. Only the backend can fail here (a launch, copy or
  // memset the device refuses): see markBroken.
  if (FlushChecked) {
    bool Unchanged = false;
    Status S = appendChecked(*this, Layer, Works, Inputs, Unchanged);
    return S.ok() || Unchanged ? S : markBroken(Works, Works.size(), S);
  }
  for (size_t I = 0; I < Works.size(); ++I) {
    Status S = applyItem(Layer, Works[I], Inputs);
    if (!S.ok())
      return markBroken(Works, I + 1, S);
  }
  return Status::success();
}

Status Cache::Impl::applyItem(unsigned Layer, const AppendWork &W,
                              Memory Inputs) {
  if (W.KeyNorm)
    if (Status S = runKeyNorm(*this, Layer, W, Inputs); !S.ok())
      return S;
  if (manifest().Pool.isTracked(Layer) && W.Plan[0].Flushed)
    return appendTracked(*this, Layer, W, Inputs);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status S = appendTensor(*this, Layer, T, W, Inputs); !S.ok())
      return S;
  return Status::success();
}

/// A backend failure in pass 2 may leave a sequence half-written (its keys
/// appended, its values not, or a flush launched and its window not
/// committed), and on an asynchronous device the work already issued for
/// the items before it may not have run. Those sequences, the first
/// `Started` items', are marked broken; the items after them are
/// unchanged. The status is a Backend error whatever the device reported
/// (an OutOfMemory status promises an unchanged cache).
Status Cache::Impl::markBroken(const std::vector<AppendWork> &Works,
                               size_t Started, const Status &Failure) {
  std::string Ids;
  for (size_t I = 0; I < Started; ++I) {
    Works[I].Seq->Broken = true;
    Ids += (I ? ", " : "") + std::to_string(Works[I].Item->Seq);
  }
  return Status::error(ErrorCode::Backend,
                       "append: the backend failed after the append began (" +
                           Failure.message() + "); " +
                           (Started == 1 ? "sequence " : "sequences ") + Ids +
                           (Started == 1 ? " is" : " are") +
                           " now broken (calls naming " +
                           (Started == 1 ? "it" : "them") + " fail until " +
                           (Started == 1 ? "it is" : "they are") + " removed)" +
                           (Started < Works.size()
                                ? "; the batch's other sequences are unchanged"
                                : ""));
}

/// Allocates what applying `Works` needs, so that an allocation failure is
/// an error before the cache changes: the device staging buffers of the
/// largest flush's tokens that are copied there (flushInput) and of host
/// key-norm input, and room in each sequence's page list.
Status Cache::Impl::reserveAppend(unsigned Layer,
                                  const std::vector<AppendWork> &Works,
                                  Memory Inputs) {
  size_t Row = rowBytes(), Device[2] = {0, 0};
  bool Staged = Inputs == Memory::Host && !B->readsHostMemory();
  for (const AppendWork &W : Works) {
    if (W.KeyNorm && Staged)
      Device[0] = std::max<size_t>(Device[0], W.Item->NumTokens * Row);
    // Device input (and host input the backend reads in place) is read
    // where it is, unless the track kernel rewrites it (flushInput).
    bool Copied = Staged || manifest().Pool.isTracked(Layer);
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      if (Copied)
        Device[int(T)] =
            std::max<size_t>(Device[int(T)], inputTokens(W.Plan[int(T)]) * Row);
  }
  try {
    for (const AppendWork &W : Works)
      for (Tensor T : {Tensor::Keys, Tensor::Values})
        W.Seq->Pages[int(T)].reserve(
            pagesFor(W.Plan[int(T)].After.Quantized, manifest().PageTokens));
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory,
                         "append: out of host memory for staging");
  }
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Device[int(T)])
      if (Expected<DevicePtr> P = scratch(Staging[int(T)], Device[int(T)]);
          !P.ok())
        return P.status();
  return Status::success();
}
