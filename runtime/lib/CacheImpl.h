//===- CacheImpl.h - Internal state of a Cache ------------------*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The buffers of docs/KernelABI.md, the host-side bookkeeping of sequences
// (slot, pages, per-layer region counts) and the scratch buffers kernels read
// their per-call inputs from. Cache.cpp builds it and answers queries;
// CacheAppend.cpp and CacheAttend.cpp implement the two operations.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_LIB_CACHEIMPL_H
#define KVQ_RUNTIME_LIB_CACHEIMPL_H

#include "kvq/Runtime/Cache.h"
#include "kvq/ABI/KernelABI.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <map>

namespace kvq::runtime {

unsigned pagesFor(unsigned Quantized, unsigned PageTokens);

/// The most chunks the key-norm kernel splits a prompt into, and the tokens
/// it wants in a chunk: one block a chunk, as many as keep a GPU's SMs or the
/// CPU's threads busy on a long prompt.
constexpr unsigned kKeyNormMaxChunks = 256;
constexpr unsigned kKeyNormChunkTokens = 128;
/// The key-norm kernel's chunks (phase 0's blocks) for a prompt of Tokens.
inline unsigned keyNormChunks(unsigned Tokens) {
  return std::clamp((Tokens + kKeyNormChunkTokens - 1) / kKeyNormChunkTokens,
                    1u, kKeyNormMaxChunks);
}

/// A device buffer that grows on demand (per-call inputs and outputs).
struct ScratchBuffer {
  DevicePtr Ptr = 0;
  size_t Bytes = 0;
};

/// One sequence: its slot, the physical pages of its block-table rows and
/// the region counts of every layer.
struct SequenceState {
  unsigned Slot = 0;
  std::vector<uint32_t> Pages[2];
  std::vector<SliceCounts> Layers;
  /// Per tensor and layer: the ring row of the window's oldest token
  /// (docs/KernelABI.md, "Window rings"; below the window capacity).
  std::vector<uint32_t> WindowHead[2];
  /// Per layer: the key norms have been computed (first append done).
  std::vector<bool> HasNorms;
  /// PageAllocator::Engine: the pages the engine assigned after those in
  /// Pages, in logical order (held by this sequence, not written yet).
  std::vector<uint32_t> Assigned[2];
  /// The backend failed while an append wrote this sequence: its keys and
  /// values may hold different tokens. Every call naming it fails (find)
  /// until it is removed.
  bool Broken = false;
};

/// What one append does to one tensor of one sequence (a pure function of
/// the counts and the number of new tokens).
struct AppendPlan {
  /// New tokens that go to the sink.
  unsigned ToSink = 0;
  /// Window tokens before the append.
  unsigned OldWindow = 0;
  /// Tokens quantized by this append (f * U).
  unsigned Flushed = 0;
  TensorCounts After;
};

AppendPlan planAppend(const TensorLayout &T, const TensorCounts &Before,
                      unsigned NumTokens);

/// A run of consecutive ring rows: window tokens [First, First + Count) of
/// a span lie at ring rows [Row, Row + Count).
struct RingRun {
  unsigned First = 0, Row = 0, Count = 0;
};

/// Window tokens [First, First + Count) of a ring of Capacity rows whose
/// oldest token is at row Head: at most two runs (the second after the
/// wrap); unused runs have Count 0. First + Count <= Capacity.
std::array<RingRun, 2> ringRuns(unsigned Head, unsigned First, unsigned Count,
                                unsigned Capacity);

/// One validated item of an append batch, with its plan per tensor.
struct AppendWork {
  SequenceState *Seq;
  const AppendItem *Item;
  AppendPlan Plan[2];
  bool KeyNorm = false;
  /// The key-norm kernel's chunk maxima of these keys are in the partials
  /// already: pass 1 validated the keys with them (validateKeysByNorm).
  bool MaximaReady = false;
};

/// Physical pages a flush writes into that other sequences also hold
/// (after a fork): [page] -> how many holders write it in one append.
using SharedWrites = std::map<uint32_t, unsigned>;

/// Runs Body; a host allocation failure becomes an OutOfMemory status.
/// Operations allocate before they change the cache, so the cache is then
/// as it was.
template <typename Fn> Status withoutExceptions(Fn &&Body) {
  try {
    return Body();
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "out of host memory");
  }
}

/// The message of an append whose K/V sizes do not match NumTokens.
std::string wrongShape(SequenceId Seq, unsigned NumTokens, size_t KSize,
                       size_t VSize, size_t Expected, const char *Unit);

class Cache::Impl {
public:
  Impl(std::shared_ptr<const Artifact> A, const CacheOptions &O,
       std::unique_ptr<Backend> B);
  ~Impl();

  /// Allocates and clears every buffer.
  Status allocateBuffers();

  // Geometry -------------------------------------------------------------
  const Manifest &manifest() const { return A->manifest(); }
  const TensorLayout &layout(Tensor T) const { return manifest().tensor(T); }
  unsigned elemBytes() const { return byteSize(manifest().Model.Type); }
  /// Bytes of one token of one layer: [Hkv][D] of the model dtype.
  size_t rowBytes() const {
    return size_t(manifest().Model.KvHeads) * manifest().Model.HeadDim *
           elemBytes();
  }
  size_t normBytesPerSlot() const {
    return size_t(manifest().Model.KvHeads) * manifest().Model.HeadDim * 4;
  }
  DevicePtr sinkAddr(Tensor T, unsigned Layer, unsigned Slot) const;
  /// The window ring of (T, Layer, Slot): window_capacity rows.
  DevicePtr windowAddr(Tensor T, unsigned Layer, unsigned Slot) const;
  /// Copies window tokens [First, First + Count) of (T, Layer, S) between
  /// the ring and linear rows: Copy(ring address, row offset in the linear
  /// rows, bytes), once per ring run.
  template <typename Fn>
  Status forWindowRuns(Tensor T, unsigned Layer, const SequenceState &S,
                       unsigned First, unsigned Count, Fn &&Copy) const {
    size_t Row = rowBytes();
    for (const RingRun &R : ringRuns(S.WindowHead[int(T)][Layer], First, Count,
                                     layout(T).WindowCapacity))
      if (R.Count)
        if (Status St = Copy(windowAddr(T, Layer, S.Slot) + R.Row * Row,
                             (R.First - First) * Row, R.Count * Row);
            !St.ok())
          return St;
    return Status::success();
  }
  DevicePtr normsAddr(unsigned Layer, unsigned Slot) const;
  // OTT pools (tracked layers only): per (layer, slot) the entries
  // [entries][Hkv][D] of each tensor and the index [Hkv][index_words] u32.
  size_t poolEntryBytesPerSlot() const {
    return size_t(manifest().Pool.Entries) * rowBytes();
  }
  size_t poolIndexBytesPerSlot() const {
    return size_t(manifest().Pool.IndexWords) * manifest().Model.KvHeads * 4;
  }
  DevicePtr poolEntriesAddr(Tensor T, unsigned Layer, unsigned Slot) const;
  DevicePtr poolIndexAddr(unsigned Layer, unsigned Slot) const;
  /// The tracked layers' pool buffers of Slot: (address, bytes) pairs.
  std::vector<std::pair<DevicePtr, size_t>> poolRegions(unsigned Slot) const;
  DevicePtr saturatedAddr(Tensor T, unsigned Layer) const {
    return Saturated +
           (uint64_t(T) * manifest().Model.Layers + Layer) * sizeof(uint32_t);
  }
  DevicePtr tableAddr(Tensor T, unsigned Slot) const;
  DevicePtr pageAddr(Tensor T, uint32_t Page) const {
    return Pages[int(T)] + uint64_t(Page) * layout(T).PageBytes;
  }

  // Lookups and checks ---------------------------------------------------
  Expected<SequenceState *> find(SequenceId Seq);
  Expected<const SequenceState *> find(SequenceId Seq) const;
  Status checkLayer(unsigned Layer) const;

  // Pages (shared by forks, reference counted) --------------------------
  bool engineAllocates() const {
    return Options.Allocator == PageAllocator::Engine;
  }
  /// Takes the next page of tensor T for S: a free page (one must be free),
  /// or the engine's next assigned page (one must be assigned).
  uint32_t takePage(Tensor T, SequenceState &S);
  /// Undoes takePage(T, S) of Page (a page cleared again): pages given back
  /// in the reverse order of their taking leave the free list, or the
  /// engine's assigned list, as it was.
  void returnPage(Tensor T, SequenceState &S, uint32_t Page);
  /// Drops one reference to Page; it is free once none is left (and back in
  /// the free list, when the cache allocates).
  void releasePage(Tensor T, uint32_t Page);
  /// Refuses What when the engine allocates pages (forks and restores take
  /// pages themselves).
  Status checkCacheAllocates(const char *What) const;
  /// Records in Writes the shared pages of S the flush of Plan writes into.
  void noteSharedWrites(const SequenceState &S, Tensor T,
                        const AppendPlan &Plan, SharedWrites &Writes) const;
  /// Pages copy-on-write needs for Writes: every writer of a shared page
  /// copies it, except the last when all of its holders write.
  size_t copiesNeeded(Tensor T, const SharedWrites &Writes) const;
  /// Gives S private copies (made on the device) of the shared pages the
  /// flush of Plan writes into.
  Status unsharePages(SequenceState &S, Tensor T, const AppendPlan &Plan);
  /// Uploads the whole block-table row of S for tensor T.
  Status uploadTable(const SequenceState &S, Tensor T);

  // Scratch --------------------------------------------------------------
  /// S, grown to Bytes if smaller; Zeroed: a new buffer is cleared (for
  /// buffers whose kernels leave them as they found them).
  Expected<DevicePtr> scratch(ScratchBuffer &S, size_t Bytes,
                              bool Zeroed = false);
  /// Launches Kernel, whose manifest kind must be Args' and every argument
  /// set (no allocation: appends launch after reserving everything they
  /// need).
  Status launch(const std::string &Kernel, Dim3 Grid, abi::KernelArgs &Args);
  /// The manifest's entry of Kernel, or an Artifact error.
  Expected<const KernelInfo *> kernelInfo(const std::string &Kernel) const;

  // Operations (CacheAppend.cpp, CacheAttend.cpp) -------------------------
  /// Where an append's K/V or an attend's Q and output live. Device
  /// addresses travel in the items' pointers.
  enum class Memory { Host, Device };
  Status append(unsigned Layer, const std::vector<AppendItem> &Batch,
                Memory Inputs);
  Status reserveAppend(unsigned Layer, const std::vector<AppendWork> &Works,
                       Memory Inputs);
  Status checkSharingOrder(const SequenceState &S, unsigned Layer,
                           const AppendItem &I) const;
  /// Pass 2 of an append for one item (outside appendChecked).
  Status applyItem(unsigned Layer, const AppendWork &W, Memory Inputs);
  /// Marks the sequences of Works[0, Started) broken after Failure in pass
  /// 2 and returns the Backend error that says so.
  Status markBroken(const std::vector<AppendWork> &Works, size_t Started,
                    const Status &Failure);
  /// Planned: the splits of an AttendPlan (none: planned for this batch).
  /// Queries: the queries of each sequence, over causal prefixes (empty:
  /// one each, over all its tokens).
  Status attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                const void *Q, float *Out, Memory Where, SplitPlan Planned = {},
                QueryRope Query = QueryRope::Rotated,
                const std::vector<unsigned> &Queries = {});
  /// Appends to Desc the `seqs` rows of attend's queries (one per sequence,
  /// or Queries[i] over causal prefixes) and raises MaxTokens to the
  /// longest row; an error for counts a sequence cannot have.
  Status queryRows(unsigned Layer, const std::vector<SequenceId> &Seqs,
                   const std::vector<unsigned> &Queries,
                   std::vector<uint32_t> &Desc, uint32_t &MaxTokens);
  /// The splits of Batch sequences of up to Longest tokens (OTT pool
  /// entries included): Pinned tokens each where non-zero (a multiple of
  /// the manifest's split_granule, at most the backend's split_tokens), else as
  /// many as keep the device's resident blocks busy (see CacheAttend.cpp).
  Expected<SplitPlan> planSplits(uint64_t Longest, size_t Batch,
                                 uint32_t Pinned = 0);
  /// The fewest blocks of any layer's attend kernel the backend runs at
  /// once (asked once).
  Expected<unsigned> residentAttendBlocks();
  /// Reserves every scratch buffer an attend of Batch sequences over
  /// NumSplits splits uses.
  Status reserveAttend(size_t Batch, uint32_t NumSplits);
  size_t arrivalBytes(size_t Batch) const {
    return Batch * manifest().Model.KvHeads * sizeof(uint32_t);
  }
  Expected<SequenceId> fork(SequenceId Source);
  /// Moves the states of Fresh (in key order) into the cache and appends
  /// their new ids to Ids. Their slots, and their pages not held yet, are
  /// the last ones of the free lists, in order. Allocates nothing (Ids has
  /// room): it cannot fail half-way.
  void adopt(std::map<SequenceId, SequenceState> &Fresh,
             std::vector<SequenceId> &Ids);

  std::shared_ptr<const Artifact> A;
  CacheOptions Options;
  std::unique_ptr<Backend> B;
  unsigned MaxPagesPerSeq = 0;

  // Buffers of KernelABI.md, indexed by Tensor.
  DevicePtr Sink[2] = {0, 0};
  DevicePtr Window[2] = {0, 0};
  DevicePtr Pages[2] = {0, 0};
  DevicePtr Tables[2] = {0, 0};
  DevicePtr Norms = 0;
  /// [kKeyNormMaxChunks][Hkv][D] f32: the key-norm kernel's partials.
  DevicePtr KeyNormPartials = 0;
  DevicePtr PoolEntries[2] = {0, 0};
  DevicePtr PoolIndex = 0;
  /// [Tensor][Layer] u32: groups whose parameters saturated.
  DevicePtr Saturated = 0;
  /// u32: set by a flush that read a non-finite token (KernelABI.md); in
  /// the Saturated buffer, after the counters.
  DevicePtr NonFinite = 0;
  uint64_t AllocatedBytes = 0;
  /// The page pools the cache allocated (not the engine's).
  bool OwnsPagePool[2] = {true, true};

  /// Device copies of host tokens that flushes quantize without their
  /// entering the window, and of host key-norm input; they only grow, so a
  /// long run of appends allocates nothing.
  ScratchBuffer Staging[2];
  ScratchBuffer QBuf, Partial, SeqsBuf, OutBuf;
  /// [B][Hkv] u32: the attend blocks done per (b, kv-head); zero between
  /// launches (the last block resets its counter).
  ScratchBuffer Arrivals;
  /// residentAttendBlocks(), once asked (0 before).
  unsigned ResidentAttendBlocks = 0;
  /// The descriptor rows SeqsBuf holds, and where it was then (empty when
  /// unknown).
  std::vector<uint32_t> SeqsOnDevice;
  DevicePtr SeqsOnDeviceAt = 0;

  std::vector<uint32_t> FreePages[2];
  /// Per physical page: the sequences holding it (0 when free).
  std::vector<uint32_t> PageRefs[2];
  std::vector<unsigned> FreeSlots;
  std::map<SequenceId, SequenceState> Sequences;
  SequenceId NextId = 1;

private:
  Status allocate(DevicePtr &Ptr, size_t Bytes);
  Status allocatePools();
};

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_LIB_CACHEIMPL_H
