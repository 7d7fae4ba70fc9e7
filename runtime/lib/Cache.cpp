//===- Cache.cpp - Cache construction, sequences and introspection --------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"

#include <cstdint>

#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <new>
#include <tuple>
#include <utility>

using namespace kvq::runtime;

std::string kvq::runtime::wrongShape(SequenceId Seq, unsigned NumTokens,
                                     size_t KSize, size_t VSize,
                                     size_t Expected, const char *Unit) {
  return "sequence " + std::to_string(Seq) +
         ": wrong shape: " + std::to_string(NumTokens) + " tokens need " +
         std::to_string(Expected) + " " + Unit + " of keys and of values, " +
         "got " + std::to_string(KSize) + " and " + std::to_string(VSize);
}

//===----------------------------------------------------------------------===//
// Cache::Impl: buffers and helpers
//===----------------------------------------------------------------------===//

Cache::Impl::Impl(std::shared_ptr<const Artifact> A, const CacheOptions &O,
                  std::unique_ptr<Backend> B)
    : A(std::move(A)), Options(O), B(std::move(B)) {
  MaxPagesPerSeq =
      O.MaxPagesPerSequence ? O.MaxPagesPerSequence : O.PagesPerTensor;
}

Cache::Impl::~Impl() {
  for (DevicePtr P :
       {Sink[0], Sink[1], Window[0], Window[1], OwnsPagePool[0] ? Pages[0] : 0,
        OwnsPagePool[1] ? Pages[1] : 0, Tables[0], Tables[1], Norms,
        PoolEntries[0], PoolEntries[1], PoolIndex, Saturated, Staging[0].Ptr,
        Staging[1].Ptr, QBuf.Ptr, Partial.Ptr, SeqsBuf.Ptr, OutBuf.Ptr})
    if (P)
      (void)B->free(P);
}

Status Cache::Impl::allocate(DevicePtr &Ptr, size_t Bytes) {
  Expected<DevicePtr> P = B->allocate(Bytes);
  if (!P.ok())
    return P.status();
  Ptr = *P;
  AllocatedBytes += Bytes;
  return B->memset(Ptr, 0, Bytes);
}

/// The product of `Factors` in bytes, or an error where it overflows.
static Expected<size_t> bufferBytes(std::initializer_list<uint64_t> Factors) {
  uint64_t Bytes = 1;
  for (uint64_t F : Factors)
    if (__builtin_mul_overflow(Bytes, F, &Bytes) || Bytes > SIZE_MAX)
      return Status::error(ErrorCode::OutOfMemory,
                           "a cache buffer would exceed the address space");
  return size_t(Bytes);
}

Status Cache::Impl::allocateBuffers() {
  const ModelShape &M = manifest().Model;
  size_t Seqs = Options.MaxSequences;
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    const TensorLayout &L = layout(T);
    int X = int(T);
    Expected<size_t> Sizes[] = {
        bufferBytes({M.Layers, Seqs, L.Sink, rowBytes()}),
        bufferBytes({M.Layers, Seqs, L.WindowCapacity, rowBytes()}),
        bufferBytes({Options.PagesPerTensor, L.PageBytes}),
        bufferBytes({Seqs, MaxPagesPerSeq, sizeof(uint32_t)})};
    for (const Expected<size_t> &Size : Sizes)
      if (!Size.ok())
        return Size.status();
    Status S = allocate(Sink[X], *Sizes[0]);
    if (S.ok())
      S = allocate(Window[X], *Sizes[1]);
    OwnsPagePool[X] = !engineAllocates() || !Options.EnginePagePools[X];
    if (!OwnsPagePool[X])
      Pages[X] = Options.EnginePagePools[X];
    else if (S.ok())
      S = allocate(Pages[X], *Sizes[2]);
    if (S.ok())
      S = allocate(Tables[X], *Sizes[3]);
    if (!S.ok())
      return S;
    // Hand pages out lowest id first.
    for (uint32_t P = Options.PagesPerTensor; P-- > 0 && !engineAllocates();)
      FreePages[X].push_back(P);
    PageRefs[X].assign(Options.PagesPerTensor, 0);
  }
  size_t NormBytes =
      manifest().hasKeyNorm() ? M.Layers * Seqs * normBytesPerSlot() : 0;
  if (Status S = allocate(Norms, NormBytes); !S.ok())
    return S;
  // The key-norm kernel's chunk maxima: appends run one at a time, each
  // sequence's key norms after the other's.
  size_t PartialBytes =
      manifest().hasKeyNorm() ? kKeyNormMaxChunks * normBytesPerSlot() : 0;
  if (Status S = allocate(KeyNormPartials, PartialBytes); !S.ok())
    return S;
  if (Status S = allocatePools(); !S.ok())
    return S;
  // The flushes' NonFinite word follows their saturated-group counters.
  if (Status S = allocate(Saturated, (2 * M.Layers + 1) * sizeof(uint32_t));
      !S.ok())
    return S;
  NonFinite = Saturated + 2 * M.Layers * sizeof(uint32_t);
  for (unsigned Slot = Options.MaxSequences; Slot-- > 0;)
    FreeSlots.push_back(Slot);
  return Status::success();
}

Status Cache::Impl::allocatePools() {
  const PoolLayout &Pool = manifest().Pool;
  if (!Pool.Capacity)
    return Status::success();
  uint64_t Tracked = manifest().Model.Layers - Pool.FirstLayer;
  Expected<size_t> Entries =
      bufferBytes({Tracked, Options.MaxSequences, poolEntryBytesPerSlot()});
  Expected<size_t> Index =
      bufferBytes({Tracked, Options.MaxSequences, poolIndexBytesPerSlot()});
  if (!Entries.ok())
    return Entries.status();
  if (!Index.ok())
    return Index.status();
  for (DevicePtr &Ptr : PoolEntries)
    if (Status S = allocate(Ptr, *Entries); !S.ok())
      return S;
  return allocate(PoolIndex, *Index);
}

DevicePtr Cache::Impl::poolEntriesAddr(Tensor T, unsigned Layer,
                                       unsigned Slot) const {
  uint64_t Tracked = Layer - manifest().Pool.FirstLayer;
  return PoolEntries[int(T)] +
         (Tracked * Options.MaxSequences + Slot) * poolEntryBytesPerSlot();
}

DevicePtr Cache::Impl::poolIndexAddr(unsigned Layer, unsigned Slot) const {
  uint64_t Tracked = Layer - manifest().Pool.FirstLayer;
  return PoolIndex +
         (Tracked * Options.MaxSequences + Slot) * poolIndexBytesPerSlot();
}

std::vector<std::pair<DevicePtr, size_t>>
Cache::Impl::poolRegions(unsigned Slot) const {
  std::vector<std::pair<DevicePtr, size_t>> Regions;
  for (unsigned L = 0; L < manifest().Model.Layers; ++L) {
    if (!manifest().Pool.isTracked(L))
      continue;
    Regions.push_back({poolIndexAddr(L, Slot), poolIndexBytesPerSlot()});
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      Regions.push_back({poolEntriesAddr(T, L, Slot), poolEntryBytesPerSlot()});
  }
  return Regions;
}

DevicePtr Cache::Impl::sinkAddr(Tensor T, unsigned Layer, unsigned Slot) const {
  size_t PerSlot = layout(T).Sink * rowBytes();
  return Sink[int(T)] +
         (uint64_t(Layer) * Options.MaxSequences + Slot) * PerSlot;
}

DevicePtr Cache::Impl::windowAddr(Tensor T, unsigned Layer,
                                  unsigned Slot) const {
  size_t PerSlot = layout(T).WindowCapacity * rowBytes();
  return Window[int(T)] +
         (uint64_t(Layer) * Options.MaxSequences + Slot) * PerSlot;
}

DevicePtr Cache::Impl::normsAddr(unsigned Layer, unsigned Slot) const {
  if (!manifest().hasKeyNorm())
    return Norms;
  return Norms +
         (uint64_t(Layer) * Options.MaxSequences + Slot) * normBytesPerSlot();
}

DevicePtr Cache::Impl::tableAddr(Tensor T, unsigned Slot) const {
  return Tables[int(T)] + uint64_t(Slot) * MaxPagesPerSeq * sizeof(uint32_t);
}

/// The error of a call naming a sequence that is unknown or broken.
static Status lookupError(SequenceId Seq, bool Known) {
  if (!Known)
    return Status::error(ErrorCode::InvalidArgument,
                         "unknown sequence " + std::to_string(Seq));
  return Status::error(ErrorCode::InvalidArgument,
                       "sequence " + std::to_string(Seq) +
                           " is broken: the backend failed during an append "
                           "to it; remove it");
}

Expected<SequenceState *> Cache::Impl::find(SequenceId Seq) {
  auto It = Sequences.find(Seq);
  if (It == Sequences.end() || It->second.Broken)
    return lookupError(Seq, It != Sequences.end());
  return &It->second;
}

Expected<const SequenceState *> Cache::Impl::find(SequenceId Seq) const {
  auto It = Sequences.find(Seq);
  if (It == Sequences.end() || It->second.Broken)
    return lookupError(Seq, It != Sequences.end());
  return &It->second;
}

Status Cache::Impl::checkLayer(unsigned Layer) const {
  if (Layer >= manifest().Model.Layers)
    return Status::error(ErrorCode::InvalidArgument,
                         "layer " + std::to_string(Layer) +
                             " out of range (the model has " +
                             std::to_string(manifest().Model.Layers) + ")");
  return Status::success();
}

Expected<DevicePtr> Cache::Impl::scratch(ScratchBuffer &S, size_t Bytes,
                                         bool Zeroed) {
  if (S.Ptr && S.Bytes >= Bytes)
    return S.Ptr;
  if (S.Ptr) {
    // A kernel in flight may still read the old buffer.
    if (Status St = B->synchronize(); !St.ok())
      return St;
    if (Status St = B->free(S.Ptr); !St.ok())
      return St;
    S = ScratchBuffer();
  }
  size_t Grown = std::max<size_t>(Bytes, 256);
  Expected<DevicePtr> P = B->allocate(Grown);
  if (!P.ok())
    return P.status();
  S.Ptr = *P;
  S.Bytes = Grown;
  if (Zeroed)
    if (Status St = B->memset(S.Ptr, 0, Grown); !St.ok())
      return St;
  return S.Ptr;
}

Expected<const KernelInfo *>
Cache::Impl::kernelInfo(const std::string &Kernel) const {
  if (const KernelInfo *K = manifest().kernel(Kernel))
    return K;
  return Status::error(ErrorCode::Artifact,
                       "kernel '" + Kernel + "' missing from the manifest");
}

Status Cache::Impl::launch(const std::string &Kernel, Dim3 Grid,
                           abi::KernelArgs &Args) {
  Expected<const KernelInfo *> Info = kernelInfo(Kernel);
  if (!Info.ok())
    return Info.status();
  const KernelInfo *K = *Info;
  // The manifest's argument list matches its kind (checked when parsed).
  const char *Kind = abi::getKernel(Args.getKind()).Name;
  if (K->Kind != Kind)
    return Status::error(ErrorCode::Artifact, "kernel '" + Kernel +
                                                  "' is not a " + Kind +
                                                  " kernel");
  if (!Args.complete())
    return Status::error(ErrorCode::InvalidArgument,
                         "internal error: kernel '" + Kernel +
                             "' launched with arguments unset");
  if (Grid.X == 0 || Grid.Y == 0 || Grid.Z == 0)
    return Status::success();
  return B->launch(Kernel, Grid, K->Block, K->SharedBytes, Args.get());
}

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

Cache::Cache(std::unique_ptr<Impl> I) : P(std::move(I)) {}
Cache::~Cache() = default;

Expected<std::unique_ptr<Cache>>
Cache::create(std::shared_ptr<const Artifact> A, const CacheOptions &Options) {
  if (!A)
    return Status::error(ErrorCode::InvalidArgument, "no artifact");
  if (Options.Backend != BackendKind::Cpu &&
      Options.Backend != BackendKind::Cuda)
    return Status::error(ErrorCode::InvalidArgument,
                         "cache options: unknown backend " +
                             std::to_string(int(Options.Backend)));
  if (Options.Threads > kMaxThreads)
    return Status::error(ErrorCode::InvalidArgument,
                         "cache options: at most " +
                             std::to_string(kMaxThreads) + " threads, got " +
                             std::to_string(Options.Threads));
  Expected<std::unique_ptr<Backend>> B =
      Options.Backend == BackendKind::Cpu
          ? createCpuBackend(*A, Options.Threads, Options.Code)
          : createCudaBackend(*A, Options.CudaDevice, Options.PtxTarget);
  if (!B.ok())
    return B.status();
  return create(std::move(A), Options, std::move(*B));
}

Expected<std::unique_ptr<Cache>>
Cache::create(std::shared_ptr<const Artifact> A, const CacheOptions &Options,
              std::unique_ptr<Backend> B) {
  if (!A || !B)
    return Status::error(ErrorCode::InvalidArgument, "no artifact or backend");
  if (Options.MaxSequences == 0 || Options.PagesPerTensor == 0)
    return Status::error(ErrorCode::InvalidArgument,
                         "cache options: MaxSequences and PagesPerTensor "
                         "must be positive");
  // Slices start 16 bytes apart within a page (the layout's alignment) and
  // the kernels read them with 16-byte loads: a page pool must be aligned
  // as the backend's own allocations are.
  if (Options.Allocator == PageAllocator::Engine)
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      if (DevicePtr Pool = Options.EnginePagePools[int(T)];
          Pool % kPagePoolAlignment)
        return Status::error(
            ErrorCode::InvalidArgument,
            std::string("cache options: the engine's ") + toString(T) +
                " page pool (address " + std::to_string(Pool) + ") is not " +
                std::to_string(kPagePoolAlignment) + "-byte aligned");
  auto I = std::make_unique<Impl>(std::move(A), Options, std::move(B));
  if (Status S = I->allocateBuffers(); !S.ok())
    return S.withContext("cache: allocating buffers failed: ");
  return std::unique_ptr<Cache>(new Cache(std::move(I)));
}

const Artifact &Cache::artifact() const { return *P->A; }
const Manifest &Cache::manifest() const { return P->manifest(); }
Backend &Cache::backend() { return *P->B; }
const CacheOptions &Cache::options() const { return P->Options; }

//===----------------------------------------------------------------------===//
// Sequences
//===----------------------------------------------------------------------===//

Expected<SequenceId> Cache::addSequence() {
  if (P->FreeSlots.empty())
    return Status::error(ErrorCode::Capacity,
                         "cache full: all " +
                             std::to_string(P->Options.MaxSequences) +
                             " sequence slots are in use");
  SequenceState S;
  S.Slot = P->FreeSlots.back();
  S.Layers.resize(manifest().Model.Layers);
  S.HasNorms.assign(manifest().Model.Layers, false);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    S.WindowHead[int(T)].assign(manifest().Model.Layers, 0);
  // A reused slot may hold a previous sequence's norms: clear them.
  if (manifest().hasKeyNorm())
    for (unsigned L = 0; L < manifest().Model.Layers; ++L)
      if (Status St =
              P->B->memset(P->normsAddr(L, S.Slot), 0, P->normBytesPerSlot());
          !St.ok())
        return St;
  // And its pools, whose counts live on the device: start them empty.
  for (auto [Addr, Bytes] : P->poolRegions(S.Slot))
    if (Status St = P->B->memset(Addr, 0, Bytes); !St.ok())
      return St;
  P->FreeSlots.pop_back();
  SequenceId Id = P->NextId++;
  P->Sequences.emplace(Id, std::move(S));
  return Id;
}

Status Cache::removeSequence(SequenceId Seq) {
  auto It = P->Sequences.find(Seq);
  if (It == P->Sequences.end())
    return Status::error(ErrorCode::InvalidArgument,
                         "unknown sequence " + std::to_string(Seq));
  SequenceState &S = It->second;
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    for (auto Page = S.Pages[int(T)].rbegin(); Page != S.Pages[int(T)].rend();
         ++Page)
      P->releasePage(T, *Page);
    for (uint32_t Page : S.Assigned[int(T)])
      P->releasePage(T, Page);
  }
  P->FreeSlots.push_back(S.Slot);
  P->Sequences.erase(It);
  return Status::success();
}

bool Cache::hasSequence(SequenceId Seq) const {
  return P->Sequences.count(Seq) != 0;
}

unsigned Cache::numSequences() const { return unsigned(P->Sequences.size()); }

std::vector<SequenceId> Cache::sequences() const {
  std::vector<SequenceId> Ids;
  for (const auto &[Id, S] : P->Sequences)
    Ids.push_back(Id);
  return Ids;
}

//===----------------------------------------------------------------------===//
// Append and attend (bodies in CacheAppend.cpp, CacheAttend.cpp)
//===----------------------------------------------------------------------===//

Expected<SequenceId> Cache::forkSequence(SequenceId Source) {
  try {
    return P->fork(Source);
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "fork: out of host memory");
  }
}

Status Cache::append(unsigned Layer, const std::vector<AppendItem> &Batch) {
  return withoutExceptions(
      [&] { return P->append(Layer, Batch, Impl::Memory::Host); });
}

Status Cache::append(unsigned Layer, const std::vector<AppendItemF32> &Batch) {
  return withoutExceptions([&] { return appendF32(Layer, Batch); });
}

namespace {

/// convertFromF32 on the backend's host threads, in chunks that each take
/// longer than a wake of the pool (a decode step's one token stays on the
/// caller's thread).
void convertOnHost(Backend &B, DType Type, const float *In, size_t N,
                   void *Out) {
  constexpr size_t kChunk = size_t(1) << 16;
  size_t Bytes = byteSize(Type);
  B.forEachOnHost((N + kChunk - 1) / kChunk, [&](uint64_t C) {
    size_t First = C * kChunk;
    convertFromF32(Type, In + First, std::min(kChunk, N - First),
                   static_cast<uint8_t *>(Out) + First * Bytes);
  });
}

/// An error if a finite value of In[0, N) became infinite in Converted (the
/// model dtype's copy): it overflows the dtype, which the non-finite check
/// of the copy would otherwise report as a NaN or infinity the caller never
/// passed.
Status checkNoOverflow(DType Type, const float *In, const void *Converted,
                       size_t N, const ModelShape &M, SequenceId Seq,
                       const char *What) {
  size_t Bad = findNonFinite(Type, Converted, N);
  if (Bad == N || !std::isfinite(In[Bad]))
    return Status::success();
  size_t Row = size_t(M.KvHeads) * M.HeadDim;
  char Value[32];
  std::snprintf(Value, sizeof(Value), "%g", double(In[Bad]));
  return Status::error(ErrorCode::InvalidArgument,
                       std::string(What) + " " + Value + " at token " +
                           std::to_string(Bad / Row) + ", kv-head " +
                           std::to_string(Bad % Row / M.HeadDim) +
                           ", channel " + std::to_string(Bad % M.HeadDim) +
                           " of sequence " + std::to_string(Seq) +
                           " overflows " + toString(Type) +
                           " (largest finite " +
                           (Type == DType::F16 ? "65504" : "3.39e38") + ")");
}

} // namespace

Status Cache::appendF32(unsigned Layer,
                        const std::vector<AppendItemF32> &Batch) {
  DType Type = manifest().Model.Type;
  size_t RowElems = size_t(manifest().Model.KvHeads) * manifest().Model.HeadDim;
  std::vector<std::vector<uint8_t>> Storage;
  std::vector<AppendItem> Raw;
  for (const AppendItemF32 &I : Batch) {
    AppendItem R{I.Seq, I.NumTokens, nullptr, nullptr};
    size_t N = I.NumTokens * RowElems;
    if ((I.KCount && I.KCount != N) || (I.VCount && I.VCount != N))
      return Status::error(
          ErrorCode::InvalidArgument,
          wrongShape(I.Seq, I.NumTokens, I.KCount, I.VCount, N, "floats"));
    if (I.K && I.V && N) {
      Storage.emplace_back(N * byteSize(Type));
      convertOnHost(backend(), Type, I.K, N, Storage.back().data());
      R.K = Storage.back().data();
      Storage.emplace_back(N * byteSize(Type));
      convertOnHost(backend(), Type, I.V, N, Storage.back().data());
      R.V = Storage.back().data();
    }
    Raw.push_back(R);
  }
  Status Appended = P->append(Layer, Raw, Impl::Memory::Host);
  // The append scanned the converted rows and refused a non-finite one,
  // leaving the cache as it was; only then is it worth finding whether a
  // finite input overflowed the dtype, which its message should say.
  if (Appended.ok() || Appended.code() != ErrorCode::InvalidArgument ||
      Type == DType::F32)
    return Appended;
  for (size_t X = 0; X < Batch.size(); ++X) {
    const AppendItemF32 &I = Batch[X];
    if (!Raw[X].K)
      continue;
    size_t N = I.NumTokens * RowElems;
    for (auto [In, Out, What] :
         {std::tuple(I.K, Raw[X].K, "key"), std::tuple(I.V, Raw[X].V, "value")})
      if (Status S =
              checkNoOverflow(Type, In, Out, N, manifest().Model, I.Seq, What);
          !S.ok())
        return S;
  }
  return Appended;
}

Status Cache::attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                     const void *Q, float *Out, QueryRope Query) {
  return withoutExceptions([&] {
    return P->attend(Layer, Seqs, Q, Out, Impl::Memory::Host, {}, Query);
  });
}

Status Cache::attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                        const std::vector<float> &Q, std::vector<float> &Out,
                        QueryRope Query) {
  const ModelShape &M = manifest().Model;
  size_t N = Seqs.size() * M.Heads * M.HeadDim;
  if (Q.size() != N)
    return Status::error(ErrorCode::InvalidArgument,
                         "attend: the query has " + std::to_string(Q.size()) +
                             " values, expected " + std::to_string(N) + " (" +
                             std::to_string(Seqs.size()) + " x " +
                             std::to_string(M.Heads) + " heads x " +
                             std::to_string(M.HeadDim) + ")");
  std::vector<float> Result(N);
  if (Status S = attendF32(Layer, Seqs, Q.data(), Result.data(), Query);
      !S.ok())
    return S;
  Out = std::move(Result);
  return Status::success();
}

Status Cache::attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                        const float *Q, float *Out, QueryRope Query) {
  return attendF32(Layer, Seqs, {}, Q, Out, Query);
}

Status Cache::attend(unsigned Layer, const std::vector<SequenceId> &Seqs,
                     const std::vector<unsigned> &Queries, const void *Q,
                     float *Out, QueryRope Query) {
  return withoutExceptions([&] {
    return P->attend(Layer, Seqs, Q, Out, Impl::Memory::Host, {}, Query,
                     Queries);
  });
}

Status Cache::attendF32(unsigned Layer, const std::vector<SequenceId> &Seqs,
                        const std::vector<unsigned> &Queries, const float *Q,
                        float *Out, QueryRope Query) {
  const ModelShape &M = manifest().Model;
  // Counts that do not match the sequences leave Q unread: attend says so.
  bool Sized = Queries.empty() || Queries.size() == Seqs.size();
  size_t Rows = countQueryRows(Seqs, Queries);
  size_t N = Sized ? Rows * M.Heads * M.HeadDim : 0;
  std::vector<uint8_t> Raw(N * byteSize(M.Type));
  if (Q)
    convertFromF32(M.Type, Q, N, Raw.data());
  return withoutExceptions([&] {
    return P->attend(Layer, Seqs, Q && Sized ? Raw.data() : nullptr, Out,
                     Impl::Memory::Host, {}, Query, Queries);
  });
}

//===----------------------------------------------------------------------===//
// Accounting
//===----------------------------------------------------------------------===//

MemoryStats Cache::memoryStats() const {
  MemoryStats S;
  const Manifest &M = manifest();
  size_t Row = P->rowBytes();
  uint64_t Elems = uint64_t(M.Model.KvHeads) * M.Model.HeadDim;
  uint64_t TableEntries = 0;
  for (const auto &[Id, Seq] : P->Sequences) {
    TableEntries += Seq.Pages[0].size() + Seq.Pages[1].size();
    for (unsigned L = 0; L < M.Model.Layers; ++L) {
      const SliceCounts &C = Seq.Layers[L];
      S.WindowBytes += (C.Keys.Window + C.Values.Window) * Row;
      S.SinkBytes += (C.Keys.Sink + C.Values.Sink) * Row;
      if (Seq.HasNorms[L])
        S.NormBytes += P->normBytesPerSlot();
      S.CachedElements += (C.Keys.total() + C.Values.total()) * Elems;
    }
  }
  // Forks share pages: count physical pages once.
  S.KeyPagesInUse = P->Options.PagesPerTensor - freePages(Tensor::Keys);
  S.ValuePagesInUse = P->Options.PagesPerTensor - freePages(Tensor::Values);
  S.PageBytes = S.KeyPagesInUse * M.Keys.PageBytes +
                S.ValuePagesInUse * M.Values.PageBytes;
  S.TableBytes = TableEntries * sizeof(uint32_t);
  for (auto [Addr, Bytes] : P->poolRegions(0))
    S.PoolBytes += uint64_t(Bytes) * P->Sequences.size();
  S.BytesUsed = S.PageBytes + S.WindowBytes + S.SinkBytes + S.NormBytes +
                S.TableBytes + S.PoolBytes;
  S.BytesAllocated = P->AllocatedBytes;
  S.BitsPerElement = S.CachedElements
                         ? 8.0 * double(S.BytesUsed) / double(S.CachedElements)
                         : 0.0;
  return S;
}

Expected<std::vector<uint32_t>> Cache::saturatedGroups(Tensor T) const {
  std::vector<uint32_t> Counts(manifest().Model.Layers);
  if (Status S = P->B->copyToHost(Counts.data(), P->saturatedAddr(T, 0),
                                  Counts.size() * sizeof(uint32_t));
      !S.ok())
    return S;
  return Counts;
}

unsigned Cache::freePages(Tensor T) const {
  if (P->engineAllocates())
    return unsigned(
        std::count(P->PageRefs[int(T)].begin(), P->PageRefs[int(T)].end(), 0u));
  return unsigned(P->FreePages[int(T)].size());
}

Expected<unsigned> Cache::numPages(Tensor T, SequenceId Seq) const {
  Expected<const SequenceState *> S = std::as_const(*P).find(Seq);
  if (!S.ok())
    return S.status();
  return unsigned((*S)->Pages[int(T)].size());
}

Expected<SliceCounts> Cache::counts(SequenceId Seq, unsigned Layer) const {
  Expected<const SequenceState *> S = std::as_const(*P).find(Seq);
  if (!S.ok())
    return S.status();
  if (Status St = P->checkLayer(Layer); !St.ok())
    return St;
  return (*S)->Layers[Layer];
}

//===----------------------------------------------------------------------===//
// Introspection
//===----------------------------------------------------------------------===//

namespace {

Expected<std::vector<uint8_t>> readBytes(Backend &B, DevicePtr Src,
                                         size_t Bytes) {
  std::vector<uint8_t> Out(Bytes);
  if (Status S = B.copyToHost(Out.data(), Src, Bytes); !S.ok())
    return S;
  return Out;
}

} // namespace

Expected<std::vector<uint8_t>> Cache::readSlicePage(Tensor T, SequenceId Seq,
                                                    unsigned Layer,
                                                    unsigned KvHead,
                                                    unsigned Page) {
  Expected<SequenceState *> S = P->find(Seq);
  if (!S.ok())
    return S.status();
  if (Status St = P->checkLayer(Layer); !St.ok())
    return St;
  if (KvHead >= manifest().Model.KvHeads)
    return Status::error(ErrorCode::InvalidArgument,
                         "kv-head " + std::to_string(KvHead) + " out of range");
  const std::vector<uint32_t> &Pages = (*S)->Pages[int(T)];
  if (Page >= Pages.size())
    return Status::error(ErrorCode::InvalidArgument,
                         "sequence " + std::to_string(Seq) + " holds " +
                             std::to_string(Pages.size()) + " " + toString(T) +
                             " pages, not " + std::to_string(Page + 1));
  const LayerLayout &L = P->layout(T).Layers[Layer];
  return readBytes(*P->B,
                   P->pageAddr(T, Pages[Page]) + L.Slice.Offset +
                       uint64_t(KvHead) * L.Slice.SliceBytes,
                   L.Slice.SliceBytes);
}

/// The full-precision rows of one region (window or sink) of (Seq, Layer).
static Expected<std::vector<uint8_t>> readRegionRows(Cache::Impl &P, Tensor T,
                                                     SequenceId Seq,
                                                     unsigned Layer,
                                                     bool Window) {
  Expected<SequenceState *> S = P.find(Seq);
  if (!S.ok())
    return S.status();
  if (Status St = P.checkLayer(Layer); !St.ok())
    return St;
  const TensorCounts &Counts = (*S)->Layers[Layer][T];
  if (!Window)
    return readBytes(*P.B, P.sinkAddr(T, Layer, (*S)->Slot),
                     Counts.Sink * P.rowBytes());
  // Oldest token first, from the ring.
  std::vector<uint8_t> Out(Counts.Window * P.rowBytes());
  if (Status St = P.forWindowRuns(
          T, Layer, **S, 0, Counts.Window,
          [&](DevicePtr Ring, size_t Offset, size_t Bytes) {
            return P.B->copyToHost(Out.data() + Offset, Ring, Bytes);
          });
      !St.ok())
    return St;
  return Out;
}

Expected<std::vector<uint8_t>> Cache::readWindow(Tensor T, SequenceId Seq,
                                                 unsigned Layer) {
  return readRegionRows(*P, T, Seq, Layer, /*Window=*/true);
}

Expected<std::vector<uint8_t>> Cache::readSink(Tensor T, SequenceId Seq,
                                               unsigned Layer) {
  return readRegionRows(*P, T, Seq, Layer, /*Window=*/false);
}

Expected<std::vector<float>> Cache::readKeyNorms(SequenceId Seq,
                                                 unsigned Layer) {
  Expected<SequenceState *> S = P->find(Seq);
  if (!S.ok())
    return S.status();
  if (Status St = P->checkLayer(Layer); !St.ok())
    return St;
  if (!(*S)->HasNorms[Layer])
    return std::vector<float>();
  std::vector<float> Out(P->normBytesPerSlot() / 4);
  if (Status St = P->B->copyToHost(Out.data(), P->normsAddr(Layer, (*S)->Slot),
                                   P->normBytesPerSlot());
      !St.ok())
    return St;
  return Out;
}

/// The slot of Seq, where Layer has OTT pools.
static Expected<unsigned> pooledSlot(Cache::Impl &P, SequenceId Seq,
                                     unsigned Layer) {
  Expected<SequenceState *> S = P.find(Seq);
  if (!S.ok())
    return S.status();
  if (Status St = P.checkLayer(Layer); !St.ok())
    return St;
  if (!P.manifest().Pool.isTracked(Layer))
    return Status::error(ErrorCode::InvalidArgument,
                         "layer " + std::to_string(Layer) +
                             " has no outlier pools");
  return (*S)->Slot;
}

Expected<std::vector<uint32_t>> Cache::readPoolIndex(SequenceId Seq,
                                                     unsigned Layer) {
  Expected<unsigned> Slot = pooledSlot(*P, Seq, Layer);
  if (!Slot.ok())
    return Slot.status();
  std::vector<uint32_t> Out(P->poolIndexBytesPerSlot() / 4);
  if (Status St = P->B->copyToHost(Out.data(), P->poolIndexAddr(Layer, *Slot),
                                   P->poolIndexBytesPerSlot());
      !St.ok())
    return St;
  return Out;
}

Expected<std::vector<uint8_t>> Cache::readPoolEntries(Tensor T, SequenceId Seq,
                                                      unsigned Layer) {
  Expected<unsigned> Slot = pooledSlot(*P, Seq, Layer);
  if (!Slot.ok())
    return Slot.status();
  return readBytes(*P->B, P->poolEntriesAddr(T, Layer, *Slot),
                   P->poolEntryBytesPerSlot());
}
