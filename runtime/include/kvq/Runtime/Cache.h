//===- Cache.h - A quantized KV cache driven by an artifact -----*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// A Cache owns the buffers of docs/KernelABI.md ("Device buffers the runtime
// owns") for one artifact: sink and recent-window buffers, the page pools and
// block tables of keys and values, and the key norms. It tracks sequences
// (one slot each), applies the flush rule of docs/Numerics.md per
// (sequence, layer) and launches the artifact's kernels. It contains no
// scheme knowledge: everything comes from the manifest.
//
// Every operation validates all of its inputs before touching any buffer: an
// error (unknown sequence, wrong layer, non-finite K/V, exhausted pages, ...)
// returns a message and leaves the cache exactly as it was. Only a failure of
// the device itself (a kernel fault) can leave a partial update behind.
//
// Threads (docs/Reliability.md, "Thread-safety contract"): a Cache is not
// thread-safe; serialise every call on one cache (a mutex, or one cache per
// thread). Caches on different threads may run concurrently, and may share
// one Artifact, which is immutable once opened.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_CACHE_H
#define KVQ_RUNTIME_CACHE_H

#include "kvq/Runtime/Artifact.h"
#include "kvq/Runtime/Backend.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace kvq::runtime {

/// Identifies a sequence of a cache; never reused within one cache.
using SequenceId = uint64_t;

enum class BackendKind {
  /// Host memory and the artifact's host code (kernels.so).
  Cpu,
  /// A GPU through the CUDA driver and the artifact's PTX.
  Cuda,
};

/// How attend's query relates to the rotary embedding.
enum class QueryRope {
  /// Already rotated at the new token's position (the model's query).
  Rotated,
  /// Not rotated: the kernel rotates it (layers with pre-RoPE keys only).
  Unrotated,
};

/// Who hands out the physical pages of a cache (docs/KernelABI.md, "Engine
/// integration").
enum class PageAllocator {
  /// The cache, from its free lists (the default).
  Cache,
  /// The engine's allocator: it assigns every sequence its pages
  /// (Cache::setBlockTables) before an append needs them, and the cache
  /// takes none itself. forkSequence and restore, which would, are refused.
  Engine,
};

/// The alignment CacheOptions::EnginePagePools must have, in bytes.
constexpr unsigned kPagePoolAlignment = 16;

/// The most CPU backend threads a cache may start.
constexpr unsigned kMaxThreads = 1024;

struct CacheOptions {
  BackendKind Backend = BackendKind::Cpu;
  /// Sequences held at once (slots).
  unsigned MaxSequences = 8;
  /// Physical pages in each of the key and value pools.
  unsigned PagesPerTensor = 64;
  /// Width of the block tables: the most pages one sequence may hold.
  /// 0 means PagesPerTensor.
  unsigned MaxPagesPerSequence = 0;
  /// CPU backend: threads running kernel blocks (the caller's included),
  /// at most kMaxThreads; 0 means 1.
  unsigned Threads = 2;
  /// CPU backend: dlopen kernels.so, or use host code linked into the program.
  HostCode Code = HostCode::SharedObject;
  PageAllocator Allocator = PageAllocator::Cache;
  /// Allocator == Engine: the engine's key and value page pools, device
  /// addresses of PagesPerTensor x page_bytes bytes each, aligned to
  /// kPagePoolAlignment (else create fails with InvalidArgument); 0: the
  /// cache allocates the pool, the engine still assigns its pages.
  DevicePtr EnginePagePools[2] = {0, 0};
  /// CUDA backend: device ordinal and PTX target (empty: the newest of the
  /// artifact's targets the device loads, choosePtxTarget).
  int CudaDevice = 0;
  std::string PtxTarget;
};

/// New tokens of one sequence for one layer: K and V are [NumTokens][Hkv][D]
/// in the model dtype (raw bits: 2 bytes for f16/bf16, 4 for f32).
struct AppendItem {
  SequenceId Seq = 0;
  unsigned NumTokens = 0;
  const void *K = nullptr;
  const void *V = nullptr;
  /// Optional: the sizes of K and V in bytes. When nonzero they are checked
  /// against NumTokens x Hkv x D (a wrong shape is an error).
  size_t KBytes = 0;
  size_t VBytes = 0;
};

/// As AppendItem with fp32 values, rounded to the model dtype (RNE) on the
/// host.
struct AppendItemF32 {
  SequenceId Seq = 0;
  unsigned NumTokens = 0;
  const float *K = nullptr;
  const float *V = nullptr;
  /// Optional: the number of floats in K and V, checked when nonzero.
  size_t KCount = 0;
  size_t VCount = 0;
};

/// New tokens of one sequence in device memory (host memory on the CPU
/// backend, which is its device memory): K and V are the addresses of
/// [NumTokens][Hkv][D] values of the model dtype.
struct DeviceAppendItem {
  SequenceId Seq = 0;
  unsigned NumTokens = 0;
  DevicePtr K = 0;
  DevicePtr V = 0;
};

/// The host-side part of decode attention for one batch, as FlashInfer's
/// plan/run split: its sequences, the split count and the scratch buffers,
/// made once per batch shape (Cache::planAttend). It serves every layer and
/// every step until a sequence of the batch holds more than MaxTokens
/// tokens; each run only refreshes the 32-byte descriptor rows, and only
/// when their counts changed.
/// The flash-decoding splits of a batch: each sequence's tokens are cut
/// into Count pieces of Tokens (docs/KernelABI.md, "Splits").
struct SplitPlan {
  uint32_t Tokens = 0;
  uint32_t Count = 0;
};

/// The query rows of an attend of Seqs with query counts Queries (empty:
/// one each): [rows][Hq][D] is the shape of its Q and Out.
inline size_t countQueryRows(const std::vector<SequenceId> &Seqs,
                             const std::vector<unsigned> &Queries) {
  size_t Rows = 0;
  for (unsigned Count : Queries)
    Rows += Count;
  return Queries.empty() ? Seqs.size() : Rows;
}

struct AttendPlan {
  std::vector<SequenceId> Seqs;
  /// The queries of each sequence (Cache::attend with query counts); empty:
  /// one each.
  std::vector<unsigned> Queries;
  /// The longest context the plan covers (Splits.Count x Splits.Tokens,
  /// less the OTT pool entries of the layers with pools).
  unsigned MaxTokens = 0;
  SplitPlan Splits;
};

/// Tokens per region of one tensor of one (sequence, layer).
struct TensorCounts {
  unsigned Sink = 0;
  unsigned Quantized = 0;
  unsigned Window = 0;
  unsigned total() const { return Sink + Quantized + Window; }
};

struct SliceCounts {
  TensorCounts Keys;
  TensorCounts Values;
  const TensorCounts &operator[](Tensor T) const {
    return T == Tensor::Keys ? Keys : Values;
  }
  TensorCounts &operator[](Tensor T) {
    return T == Tensor::Keys ? Keys : Values;
  }
};

/// Memory accounting. "Used" counts what the live sequences occupy: pages in
/// use (whole pages; a page forks share counts once), the sink and window
/// tokens they hold, their key norms and the block-table entries of their
/// pages.
struct MemoryStats {
  uint64_t KeyPagesInUse = 0;
  uint64_t ValuePagesInUse = 0;
  uint64_t PageBytes = 0;
  uint64_t WindowBytes = 0;
  uint64_t SinkBytes = 0;
  uint64_t NormBytes = 0;
  uint64_t TableBytes = 0;
  /// OTT outlier pools of the sequences, at capacity (their buffers are
  /// fixed per sequence, like the bit report counts them).
  uint64_t PoolBytes = 0;
  /// The sum of the six above.
  uint64_t BytesUsed = 0;
  /// Every buffer the cache allocated, at full capacity (scratch excluded).
  uint64_t BytesAllocated = 0;
  /// Cached scalars: tokens x kv-heads x head_dim, over layers, K and V.
  uint64_t CachedElements = 0;
  /// 8 * BytesUsed / CachedElements (0 for an empty cache).
  double BitsPerElement = 0.0;
};

class Cache {
public:
  /// Creates a cache on the backend Options.Backend names.
  static Expected<std::unique_ptr<Cache>>
  create(std::shared_ptr<const Artifact> A, const CacheOptions &Options = {});
  /// Creates a cache on an explicit backend (e.g. a device backend over the
  /// PTX interpreter); Options.Backend and the backend fields are ignored.
  static Expected<std::unique_ptr<Cache>>
  create(std::shared_ptr<const Artifact> A, const CacheOptions &Options,
         std::unique_ptr<Backend> B);
  ~Cache();
  Cache(const Cache &) = delete;
  Cache &operator=(const Cache &) = delete;

  const Artifact &artifact() const;
  const Manifest &manifest() const;
  Backend &backend();
  const CacheOptions &options() const;

  //===--------------------------------------------------------------------===//
  // Sequences
  //===--------------------------------------------------------------------===//

  /// Takes a free slot for a new, empty sequence.
  Expected<SequenceId> addSequence();
  /// Frees the sequence's slot and pages.
  Status removeSequence(SequenceId Seq);
  bool hasSequence(SequenceId Seq) const;
  unsigned numSequences() const;
  /// Live sequences, in increasing id order.
  std::vector<SequenceId> sequences() const;

  /// A new sequence holding what Source holds (prefix caching, beam
  /// search): it shares Source's quantized pages, which either sequence
  /// copies before it first writes into a shared one (copy-on-write), and
  /// gets copies of the sinks, windows and key norms. Needs a free slot and
  /// no free page.
  Expected<SequenceId> forkSequence(SequenceId Source);

  //===--------------------------------------------------------------------===//
  // Save and restore (docs/Reliability.md, "Cache files")
  //===--------------------------------------------------------------------===//

  /// Writes Seqs (every live sequence when empty) to Path in the versioned,
  /// checksummed cache-file format: region counts, pages, sinks, windows
  /// and key norms, bit-exact. Path is replaced only once the whole file is
  /// written.
  Status save(const std::string &Path,
              const std::vector<SequenceId> &Seqs = {});
  /// The bytes save() writes.
  Expected<std::vector<uint8_t>>
  serialize(const std::vector<SequenceId> &Seqs = {});
  /// Adds the sequences of a file written by save() from a cache of the
  /// same artifact, as new sequences, and returns their ids in file order.
  /// A truncated, corrupt or foreign file, or one that does not fit in the
  /// free slots and pages, is an error that leaves the cache unchanged.
  Expected<std::vector<SequenceId>> restore(const std::string &Path);
  Expected<std::vector<SequenceId>> deserialize(const uint8_t *Data,
                                                size_t Size);

  //===--------------------------------------------------------------------===//
  // Append and attend
  //===--------------------------------------------------------------------===//

  /// Appends tokens to Layer for every sequence of Batch (each at most once).
  /// A prefill and a decode step are the same call. On a sequence's first
  /// append to a key_norm layer, that append (the prompt) fixes the layer's
  /// key norms. A failure changes nothing, except a backend failure after
  /// the append began writing: that returns ErrorCode::Backend and leaves
  /// the sequences it had begun broken (every call naming one fails until
  /// it is removed; docs/Reliability.md, "State is never half-changed").
  Status append(unsigned Layer, const std::vector<AppendItem> &Batch);
  Status append(unsigned Layer, const std::vector<AppendItemF32> &Batch);
  /// Makes `append(L, {{Seq, N, KFloats, VFloats}})` the fp32 append: a
  /// braced list prefers this overload when its pointers are `float *`, and
  /// cannot use it for raw-bit pointers (uint16_t *, void *).
  Status append(unsigned Layer, std::initializer_list<AppendItemF32> Batch) {
    return append(Layer, std::vector<AppendItemF32>(Batch));
  }

  /// Decode attention of Layer for one query per sequence: Q is
  /// [Seqs.size()][Hq][D] in the model dtype, Out is [Seqs.size()][Hq][D].
  /// The query is rotated at the new token's position as the model computes
  /// it; for a layer with pre-RoPE keys it may instead be passed unrotated
  /// (QueryRope::Unrotated): the kernel rotates it to position T - 1 of each
  /// sequence of T tokens (docs/Numerics.md, "Pre-RoPE keys"). Unrotated on
  /// a layer without pre-RoPE keys is an error.
  Status attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                const void *Q, float *Out,
                QueryRope Query = QueryRope::Rotated);
  /// As attend with an fp32 query, rounded to the model dtype (RNE).
  Status attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                   const float *Q, float *Out,
                   QueryRope Query = QueryRope::Rotated);
  /// As attendF32, checking Q's size ([Seqs.size()][Hq][D]) and sizing Out.
  Status attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                   const std::vector<float> &Q, std::vector<float> &Out,
                   QueryRope Query = QueryRope::Rotated);

  /// Attention of several queries per sequence in one launch (chunked
  /// prefill, speculative verification): sequence Seqs[i], holding T_i
  /// tokens of Layer, has Queries[i] queries (1 to T_i), consecutive rows of
  /// Q and Out ([sum of Queries][Hq][D]), those of its last Queries[i]
  /// tokens: its j-th query attends its first T_i - Queries[i] + 1 + j
  /// tokens, each as the cache holds it now (docs/KernelABI.md, "Several
  /// queries per sequence"). In a layer with OTT pools every query must see
  /// all the quantized tokens. attend(Layer, Seqs, Q, Out) is Queries of
  /// all ones.
  Status attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                const std::vector<unsigned> &Queries, const void *Q, float *Out,
                QueryRope Query = QueryRope::Rotated);
  Status attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                   const std::vector<unsigned> &Queries, const float *Q,
                   float *Out, QueryRope Query = QueryRope::Rotated);

  //===--------------------------------------------------------------------===//
  // Engine-facing: device memory and streams (docs/KernelABI.md, "Engine
  // integration")
  //===--------------------------------------------------------------------===//

  /// As append with K and V in device memory. The work is issued on Stream
  /// (a CUstream; null: the default stream; the CPU backend ignores it) and
  /// nothing waits for it. K and V are not scanned for non-finite values
  /// (that would read them back); every other check is append's, and a
  /// batch that fails one changes nothing.
  Status appendDevice(unsigned Layer,
                      const std::vector<DeviceAppendItem> &Batch,
                      StreamHandle Stream = nullptr);
  /// As attend with Q ([Seqs.size()][Hq][D], model dtype, 16-byte aligned)
  /// and Out (same shape, f32) in device memory, issued on Stream without
  /// waiting. Q is not scanned for non-finite values.
  Status attendDevice(unsigned Layer, const std::vector<SequenceId> &Seqs,
                      DevicePtr Q, DevicePtr Out, StreamHandle Stream = nullptr,
                      QueryRope Query = QueryRope::Rotated);
  /// As attend with several queries per sequence, Q and Out in device
  /// memory.
  Status attendDevice(unsigned Layer, const std::vector<SequenceId> &Seqs,
                      const std::vector<unsigned> &Queries, DevicePtr Q,
                      DevicePtr Out, StreamHandle Stream = nullptr,
                      QueryRope Query = QueryRope::Rotated);
  /// Waits for the work issued on Stream. The host-pointer calls and the
  /// reads below run on the default stream: after work on a non-blocking
  /// stream, synchronize it first.
  Status synchronize(StreamHandle Stream = nullptr);

  /// Allocator == Engine: sets the block-table rows of tensor T for Seqs,
  /// in FlashInfer's CSR form: sequence i's physical pages, in logical
  /// order, are Indices[Indptr[i] : Indptr[i + 1]]. A row begins with the
  /// pages that hold the sequence's quantized tokens (they cannot move; its
  /// last page holds counts().Quantized % page_tokens of them); the pages
  /// after them serve its next flushes. Every page is below
  /// PagesPerTensor, once in the batch and held by no other sequence. The
  /// whole batch is checked first: an error changes nothing.
  Status setBlockTables(Tensor T, const std::vector<SequenceId> &Seqs,
                        const uint32_t *Indptr, const uint32_t *Indices);
  /// One row (vLLM's block-table form).
  Status setBlockTable(Tensor T, SequenceId Seq,
                       const std::vector<uint32_t> &Pages);

  /// Plans attention over Seqs for contexts of up to MaxTokens tokens (at
  /// least the longest the batch holds now, in any layer) and reserves its
  /// scratch, so that running it allocates nothing. The split size is
  /// chosen for the batch and the device unless SplitTokens pins it (a
  /// multiple of the manifest's split_granule, at most the backend's
  /// split_tokens: Manifest::splitTokens):
  /// a pinned size makes a sequence's result independent of its batch.
  /// Queries plans several queries per sequence (as attend with query
  /// counts).
  Expected<AttendPlan> planAttend(const std::vector<SequenceId> &Seqs,
                                  unsigned MaxTokens = 0,
                                  unsigned SplitTokens = 0,
                                  const std::vector<unsigned> &Queries = {});
  /// attend / attendDevice over Plan's batch. A sequence longer than the
  /// plan covers, or one removed since, is an error; nothing runs.
  Status attend(unsigned Layer, const AttendPlan &Plan, const void *Q,
                float *Out, QueryRope Query = QueryRope::Rotated);
  Status attendDevice(unsigned Layer, const AttendPlan &Plan, DevicePtr Q,
                      DevicePtr Out, StreamHandle Stream = nullptr,
                      QueryRope Query = QueryRope::Rotated);

  //===--------------------------------------------------------------------===//
  // Accounting and introspection
  //===--------------------------------------------------------------------===//

  MemoryStats memoryStats() const;
  /// Per layer of tensor T: the groups quantized since the cache was created
  /// whose stored parameters saturated at the parameter dtype's largest
  /// finite value (finite, but not accurate: docs/Numerics.md).
  Expected<std::vector<uint32_t>> saturatedGroups(Tensor T) const;
  /// Physical pages of tensor T no sequence holds.
  unsigned freePages(Tensor T) const;
  /// Logical pages of tensor T the sequence holds.
  Expected<unsigned> numPages(Tensor T, SequenceId Seq) const;
  /// Region counts of (Seq, Layer).
  Expected<SliceCounts> counts(SequenceId Seq, unsigned Layer) const;
  /// The bytes of slice (Layer, KvHead) of the sequence's logical page Page
  /// of tensor T (sliceBytes of the layer).
  Expected<std::vector<uint8_t>> readSlicePage(Tensor T, SequenceId Seq,
                                               unsigned Layer, unsigned KvHead,
                                               unsigned Page);
  /// The window / sink tokens of (Seq, Layer), [n][Hkv][D] raw model dtype,
  /// oldest first.
  Expected<std::vector<uint8_t>> readWindow(Tensor T, SequenceId Seq,
                                            unsigned Layer);
  Expected<std::vector<uint8_t>> readSink(Tensor T, SequenceId Seq,
                                          unsigned Layer);
  /// The key norms of (Seq, Layer), [Hkv][D] (empty before the first
  /// append or without key_norm).
  Expected<std::vector<float>> readKeyNorms(SequenceId Seq, unsigned Layer);
  /// OTT pools of (Seq, Layer) (docs/KernelABI.md, "Outlier pools"): the
  /// index, [Hkv][index_words] u32 (pool count, extra count, stopped, 0, the
  /// entries' positions), and the key or value entries, [entries][Hkv][D]
  /// raw model dtype. An error for a layer without pools.
  Expected<std::vector<uint32_t>> readPoolIndex(SequenceId Seq, unsigned Layer);
  Expected<std::vector<uint8_t>> readPoolEntries(Tensor T, SequenceId Seq,
                                                 unsigned Layer);

  class Impl;

private:
  Status appendF32(unsigned Layer, const std::vector<AppendItemF32> &Batch);
  explicit Cache(std::unique_ptr<Impl> I);
  std::unique_ptr<Impl> P;
};

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_CACHE_H
