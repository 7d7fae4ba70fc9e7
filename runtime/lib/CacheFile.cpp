//===- CacheFile.cpp - Saving and restoring sequences ---------------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The cache-file format (docs/Reliability.md, "Cache files"), little-endian:
//
//   header    "KVQCACHE", u32 format version, u32 sequence count,
//             u64 manifest hash of the artifact
//   sequence  u64 id, u32 key pages, u32 value pages,
//             per layer: u32 sink, quantized, window of keys then values,
//                        u32 has-norms,
//             the key pages, the value pages (page_bytes each),
//             per layer, keys then values: sink rows, window rows,
//             per layer with norms: [Hkv][D] f32 key norms,
//             per layer with OTT pools: the pool index ([Hkv][index_words]
//             u32), the key entries, the value entries ([entries][Hkv][D])
//   trailer   u64 FNV-1a 64 of every byte before it
//
// Restoring parses and checks the whole file (checksum, artifact, every
// count against the layout, capacity) before it writes any buffer, so a bad
// file changes nothing.
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"

#include "kvq/Runtime/Runtime.h"
#include "kvq/Support/PathCheck.h"
#include "kvq/ABI/ManifestBinding.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace kvq::runtime;

namespace {

constexpr char kMagic[8] = {'K', 'V', 'Q', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 24, kTrailerBytes = 8;

Status fileError(std::string Message) {
  return Status::error(ErrorCode::File, "cache file: " + std::move(Message));
}

uint64_t checksum(const uint8_t *Data, size_t Size) {
  return kvq::fnv1a64(
      std::string_view(reinterpret_cast<const char *>(Data), Size));
}

/// Appends little-endian fields.
class Writer {
public:
  explicit Writer(std::vector<uint8_t> &Out) : Out(Out) {}
  void u32(uint32_t V) { put(V, 4); }
  void u64(uint64_t V) { put(V, 8); }
  /// Grows the output by Bytes and returns where they go.
  uint8_t *reserve(size_t Bytes) {
    Out.resize(Out.size() + Bytes);
    return Out.data() + Out.size() - Bytes;
  }

private:
  void put(uint64_t V, unsigned Bytes) {
    for (unsigned I = 0; I < Bytes; ++I)
      Out.push_back(uint8_t(V >> (8 * I)));
  }
  std::vector<uint8_t> &Out;
};

/// Reads little-endian fields; every read checks the bytes left.
class Reader {
public:
  Reader(const uint8_t *Data, size_t Size) : P(Data), Left(Size) {}
  bool u32(uint32_t &V) {
    uint64_t W;
    return get(W, 4) && ((V = uint32_t(W)), true);
  }
  bool u64(uint64_t &V) { return get(V, 8); }
  /// The next Bytes bytes, or null when fewer are left.
  const uint8_t *bytes(uint64_t Bytes) {
    if (Bytes > Left)
      return nullptr;
    const uint8_t *At = P;
    P += Bytes;
    Left -= Bytes;
    return At;
  }
  size_t left() const { return Left; }

private:
  bool get(uint64_t &V, unsigned Bytes) {
    const uint8_t *At = bytes(Bytes);
    if (!At)
      return false;
    V = 0;
    for (unsigned I = 0; I < Bytes; ++I)
      V |= uint64_t(At[I]) << (8 * I);
    return true;
  }
  const uint8_t *P;
  size_t Left;
};

/// One parsed sequence record; the byte pointers point into the file.
struct SavedSequence {
  uint64_t Id = 0;
  uint32_t NumPages[2] = {0, 0};
  std::vector<SliceCounts> Layers;
  std::vector<bool> HasNorms;
  const uint8_t *Pages[2] = {nullptr, nullptr};
  /// Per layer, indexed by Tensor.
  std::vector<const uint8_t *> Sink[2], Window[2];
  std::vector<const uint8_t *> Norms;
  /// The pool regions of Cache::Impl::poolRegions, in its order.
  std::vector<const uint8_t *> Pools;
};

} // namespace

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

/// Appends the record of S, reading its buffers from the device.
static Status writeSequence(Cache::Impl &C, SequenceId Id,
                            const SequenceState &S, Writer &W) {
  unsigned Layers = C.manifest().Model.Layers;
  W.u64(Id);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    W.u32(uint32_t(S.Pages[int(T)].size()));
  for (unsigned L = 0; L < Layers; ++L) {
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      for (unsigned N : {S.Layers[L][T].Sink, S.Layers[L][T].Quantized,
                         S.Layers[L][T].Window})
        W.u32(N);
    W.u32(S.HasNorms[L] ? 1 : 0);
  }
  auto Read = [&](DevicePtr Src, size_t Bytes) {
    return C.B->copyToHost(W.reserve(Bytes), Src, Bytes);
  };
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    for (uint32_t Page : S.Pages[int(T)])
      if (Status St = Read(C.pageAddr(T, Page), C.layout(T).PageBytes);
          !St.ok())
        return St;
  for (unsigned L = 0; L < Layers; ++L)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const TensorCounts &N = S.Layers[L][T];
      if (Status St = Read(C.sinkAddr(T, L, S.Slot), N.Sink * C.rowBytes());
          !St.ok())
        return St;
      // Oldest token first, whatever the ring's head (the file format
      // predates the rings).
      uint8_t *Rows = W.reserve(N.Window * C.rowBytes());
      if (Status St = C.forWindowRuns(
              T, L, S, 0, N.Window,
              [&](DevicePtr Ring, size_t Offset, size_t Bytes) {
                return C.B->copyToHost(Rows + Offset, Ring, Bytes);
              });
          !St.ok())
        return St;
    }
  for (unsigned L = 0; L < Layers; ++L)
    if (S.HasNorms[L])
      if (Status St = Read(C.normsAddr(L, S.Slot), C.normBytesPerSlot());
          !St.ok())
        return St;
  for (auto [Addr, Bytes] : C.poolRegions(S.Slot))
    if (Status St = Read(Addr, Bytes); !St.ok())
      return St;
  return Status::success();
}

Expected<std::vector<uint8_t>>
Cache::serialize(const std::vector<SequenceId> &Seqs) {
  std::vector<SequenceId> Ids = Seqs.empty() ? sequences() : Seqs;
  std::vector<const SequenceState *> States;
  for (SequenceId Id : Ids) {
    Expected<const SequenceState *> S = std::as_const(*P).find(Id);
    if (!S.ok())
      return S.status().withContext("save: ");
    States.push_back(*S);
  }
  std::vector<uint8_t> Out;
  Writer W(Out);
  std::memcpy(W.reserve(sizeof kMagic), kMagic, sizeof kMagic);
  W.u32(kFormatVersion);
  W.u32(uint32_t(Ids.size()));
  W.u64(P->A->manifestHash());
  for (size_t I = 0; I < Ids.size(); ++I)
    if (Status St = writeSequence(*P, Ids[I], *States[I], W); !St.ok())
      return St;
  W.u64(checksum(Out.data(), Out.size()));
  return Out;
}

namespace {

/// Writes all of Bytes to Fd.
bool writeAll(int Fd, const uint8_t *Bytes, size_t Size) {
  while (Size) {
    ssize_t N = ::write(Fd, Bytes, Size);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      return false;
    Bytes += N;
    Size -= size_t(N);
  }
  return true;
}

/// Writes Bytes to Path through a neighbour, Path + ".partial", renamed
/// over Path once complete: Path is never half-written. Whatever is at the
/// neighbour's name (a stale file, or a symlink planted to redirect the
/// write) is removed, not followed, and the neighbour is created anew
/// (O_EXCL: nothing recreated there in between is opened either).
Status writeFileAtomically(const std::string &Path,
                           const std::vector<uint8_t> &Bytes) {
  std::string Tmp = Path + ".partial";
  if (::unlink(Tmp.c_str()) != 0 && errno != ENOENT)
    return fileError("cannot replace '" + Tmp + "': " + std::strerror(errno));
  int Fd = ::open(Tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (Fd < 0)
    return fileError("cannot create '" + Tmp + "': " + std::strerror(errno));
  bool Ok = writeAll(Fd, Bytes.data(), Bytes.size());
  int Error = errno;
  if (::close(Fd) != 0 && Ok) {
    Ok = false;
    Error = errno;
  }
  if (Ok && std::rename(Tmp.c_str(), Path.c_str()) != 0) {
    Ok = false;
    Error = errno;
  }
  if (!Ok) {
    ::unlink(Tmp.c_str());
    return fileError("cannot write '" + Path + "': " + std::strerror(Error));
  }
  return Status::success();
}

/// Reads the regular file at Path. Anything else is refused before it is
/// read: a FIFO would block (it is opened non-blocking, so the open does
/// not wait for a writer), a directory or a device has no cache in it.
Status readRegularFile(const std::string &Path, std::vector<uint8_t> &Bytes) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (Fd < 0)
    return fileError("cannot open '" + Path + "': " + std::strerror(errno));
  struct FdCloser {
    int Fd;
    ~FdCloser() { ::close(Fd); }
  } Closer{Fd};
  struct stat Info;
  if (::fstat(Fd, &Info) != 0)
    return fileError("cannot open '" + Path + "': " + std::strerror(errno));
  if (!S_ISREG(Info.st_mode))
    return fileError("'" + Path + "' is not a regular file");
  // st_size is a hint (a file may change while it is read, and /proc files
  // report 0): read to the end.
  Bytes.clear();
  Bytes.reserve(size_t(std::max<off_t>(Info.st_size, 0)) + 1);
  uint8_t Chunk[1 << 16];
  for (;;) {
    ssize_t N = ::read(Fd, Chunk, sizeof Chunk);
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0)
      return fileError("cannot read '" + Path + "': " + std::strerror(errno));
    if (N == 0)
      return Status::success();
    Bytes.insert(Bytes.end(), Chunk, Chunk + N);
  }
}

} // namespace

Status Cache::save(const std::string &Path,
                   const std::vector<SequenceId> &Seqs) {
  if (Status S = checkPathHasNoNul(Path, "save: cache file path"); !S.ok())
    return S;
  // No exception leaves the C++ API: any escaping the file system calls'
  // wrappers is an error of the file.
  try {
    Expected<std::vector<uint8_t>> Bytes = serialize(Seqs);
    if (!Bytes.ok())
      return Bytes.status();
    return writeFileAtomically(Path, *Bytes);
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "save: out of host memory");
  } catch (const std::exception &E) {
    return fileError("cannot write '" + Path + "': " + E.what());
  }
}

//===----------------------------------------------------------------------===//
// Parsing and checking
//===----------------------------------------------------------------------===//

namespace {

/// Checks one tensor's counts of one layer of a saved sequence: the flush
/// rule makes them a function of the layer's token count.
Status checkCounts(const TensorLayout &TL, const TensorCounts &N,
                   unsigned Total, uint32_t Pages, unsigned PageTokens,
                   const std::string &Where) {
  TensorCounts Want = planAppend(TL, TensorCounts(), Total).After;
  if (N.Sink != Want.Sink || N.Quantized != Want.Quantized ||
      N.Window != Want.Window || pagesFor(N.Quantized, PageTokens) > Pages)
    return fileError(Where + ": impossible counts (sink " +
                     std::to_string(N.Sink) + ", quantized " +
                     std::to_string(N.Quantized) + ", window " +
                     std::to_string(N.Window) + " with " +
                     std::to_string(Pages) + " pages)");
  return Status::success();
}

/// Checks what ties the layers of a saved sequence together: keys and
/// values hold the same tokens, a code-sharing layer no more than its owner,
/// and key_norm layers have norms once they hold tokens.
Status checkLayers(const Manifest &M, const SavedSequence &S,
                   const std::string &Where) {
  for (unsigned L = 0; L < M.Model.Layers; ++L) {
    unsigned Total = S.Layers[L].Keys.total();
    std::string Layer = Where + ", layer " + std::to_string(L);
    if (S.Layers[L].Values.total() != Total)
      return fileError(Layer + ": keys and values hold different tokens");
    if (!M.Layers[L].KeyNorm.empty() && S.HasNorms[L] != (Total > 0))
      return fileError(Layer + ": key norms do not match its tokens");
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      int Owner = int(M.tensor(T).Layers[L].Slice.CodesFrom);
      if (Owner >= 0 && S.Layers[Owner][T].total() < Total)
        return fileError(Layer + " holds more tokens than layer " +
                         std::to_string(Owner) + ", whose codes it reads");
    }
  }
  return Status::success();
}

/// Parses the counts of one record and checks them against the layout.
Status parseCounts(const Cache::Impl &C, Reader &R, SavedSequence &S,
                   const std::string &Where) {
  const Manifest &M = C.manifest();
  if (!R.u64(S.Id) || !R.u32(S.NumPages[0]) || !R.u32(S.NumPages[1]))
    return fileError("truncated in " + Where);
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (S.NumPages[int(T)] > C.MaxPagesPerSeq)
      return fileError(Where + " holds " + std::to_string(S.NumPages[int(T)]) +
                       " " + toString(T) + " pages; a sequence may hold " +
                       std::to_string(C.MaxPagesPerSeq));
  S.Layers.resize(M.Model.Layers);
  S.HasNorms.resize(M.Model.Layers);
  for (unsigned L = 0; L < M.Model.Layers; ++L) {
    std::string Layer = Where + ", layer " + std::to_string(L);
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      TensorCounts &N = S.Layers[L][T];
      if (!R.u32(N.Sink) || !R.u32(N.Quantized) || !R.u32(N.Window))
        return fileError("truncated in " + Layer);
      uint64_t Total = uint64_t(N.Sink) + N.Quantized + N.Window;
      if (Total > 0x7fffffff)
        return fileError(Layer + ": more than 2^31 tokens");
      if (Status St =
              checkCounts(M.tensor(T), N, unsigned(Total), S.NumPages[int(T)],
                          M.PageTokens, Layer + " " + toString(T));
          !St.ok())
        return St;
    }
    uint32_t Norms;
    if (!R.u32(Norms))
      return fileError("truncated in " + Layer);
    if (Norms > 1 || (Norms && M.Layers[L].KeyNorm.empty()))
      return fileError(Layer + ": bad key-norm flag " + std::to_string(Norms));
    S.HasNorms[L] = Norms;
  }
  return checkLayers(M, S, Where);
}

/// Checks the pool indexes of a saved sequence (docs/KernelABI.md,
/// "Outlier pools"): counts within capacity, the extra pool used only once
/// the pool is full, and every entry a token of the quantized region.
Status checkPools(const Manifest &M, const SavedSequence &S,
                  const std::string &Where) {
  const PoolLayout &Pool = M.Pool;
  size_t Region = 0;
  for (unsigned L = 0; L < M.Model.Layers; ++L) {
    if (!Pool.isTracked(L))
      continue;
    const uint8_t *Index = S.Pools[Region];
    Region += 3;
    const TensorCounts &N = S.Layers[L].Keys;
    for (unsigned H = 0; H < M.Model.KvHeads; ++H) {
      auto Word = [&](unsigned I) {
        uint32_t V;
        std::memcpy(&V, Index + (size_t(H) * Pool.IndexWords + I) * 4, 4);
        return V;
      };
      uint32_t Count = Word(0), Extra = Word(1);
      bool Ok = Count <= Pool.Capacity && Extra <= Pool.Extra && Word(2) <= 1 &&
                Word(3) == 0 && (Extra == 0 || Count == Pool.Capacity);
      for (unsigned E = 0; Ok && E < Count + Extra; ++E) {
        uint32_t Entry = E < Count ? E : Pool.Capacity + (E - Count);
        uint32_t Position = Word(4 + Entry);
        Ok = Position >= N.Sink && Position - N.Sink < N.Quantized;
      }
      if (!Ok)
        return fileError(Where + ", layer " + std::to_string(L) + ", kv-head " +
                         std::to_string(H) + ": impossible outlier pool index");
    }
  }
  return Status::success();
}

/// Parses one record: its counts, then its bytes.
Status parseSequence(const Cache::Impl &C, Reader &R, unsigned Index,
                     SavedSequence &S) {
  std::string Where = "sequence record " + std::to_string(Index);
  if (Status St = parseCounts(C, R, S, Where); !St.ok())
    return St;
  unsigned Layers = C.manifest().Model.Layers;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (!(S.Pages[int(T)] =
              R.bytes(uint64_t(S.NumPages[int(T)]) * C.layout(T).PageBytes)))
      return fileError("truncated in the pages of " + Where);
  for (unsigned L = 0; L < Layers; ++L)
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const TensorCounts &N = S.Layers[L][T];
      S.Sink[int(T)].push_back(R.bytes(uint64_t(N.Sink) * C.rowBytes()));
      S.Window[int(T)].push_back(R.bytes(uint64_t(N.Window) * C.rowBytes()));
      if (!S.Sink[int(T)].back() || !S.Window[int(T)].back())
        return fileError("truncated in the sinks and windows of " + Where);
    }
  S.Norms.assign(Layers, nullptr);
  for (unsigned L = 0; L < Layers; ++L)
    if (S.HasNorms[L] && !(S.Norms[L] = R.bytes(C.normBytesPerSlot())))
      return fileError("truncated in the key norms of " + Where);
  for (auto [Addr, Bytes] : C.poolRegions(0)) {
    S.Pools.push_back(R.bytes(Bytes));
    if (!S.Pools.back())
      return fileError("truncated in the outlier pools of " + Where);
  }
  return checkPools(C.manifest(), S, Where);
}

/// Parses and checks a whole file.
Expected<std::vector<SavedSequence>>
parseFile(const Cache::Impl &C, const uint8_t *Data, size_t Size) {
  if (!Data || Size < kHeaderBytes + kTrailerBytes)
    return fileError("truncated: " + std::to_string(Size) +
                     " bytes, a file has at least " +
                     std::to_string(kHeaderBytes + kTrailerBytes));
  if (std::memcmp(Data, kMagic, sizeof kMagic) != 0)
    return fileError("not a kvq cache file (bad magic)");
  Reader R(Data + sizeof kMagic, Size - sizeof kMagic - kTrailerBytes);
  uint32_t Version = 0, Count = 0;
  uint64_t Hash = 0, Sum = 0;
  (void)R.u32(Version);
  if (Version != kFormatVersion)
    return fileError("format version " + std::to_string(Version) +
                     ", this runtime reads " + std::to_string(kFormatVersion));
  (void)Reader(Data + Size - kTrailerBytes, kTrailerBytes).u64(Sum);
  if (Sum != checksum(Data, Size - kTrailerBytes))
    return fileError("checksum mismatch: the file is corrupt or truncated");
  (void)R.u32(Count);
  (void)R.u64(Hash);
  if (Hash != C.A->manifestHash())
    return fileError("saved from another artifact (manifest hash " +
                     std::to_string(Hash) + ", this cache's is " +
                     std::to_string(C.A->manifestHash()) + ")");
  if (Count > C.Options.MaxSequences)
    return fileError(std::to_string(Count) + " sequences, the cache has " +
                     std::to_string(C.Options.MaxSequences) + " slots");
  std::vector<SavedSequence> Saved(Count);
  for (unsigned I = 0; I < Count; ++I)
    if (Status St = parseSequence(C, R, I, Saved[I]); !St.ok())
      return St;
  if (R.left())
    return fileError(std::to_string(R.left()) +
                     " bytes after the last sequence record");
  return Saved;
}

} // namespace

//===----------------------------------------------------------------------===//
// Restoring
//===----------------------------------------------------------------------===//

/// Checks that Saved fits in the free slots and pages.
static Status checkRoom(const Cache::Impl &C,
                        const std::vector<SavedSequence> &Saved) {
  if (Saved.size() > C.FreeSlots.size())
    return Status::error(ErrorCode::Capacity,
                         "restore: the file holds " +
                             std::to_string(Saved.size()) + " sequences, " +
                             std::to_string(C.FreeSlots.size()) +
                             " slots are free");
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    uint64_t Pages = 0;
    for (const SavedSequence &S : Saved)
      Pages += S.NumPages[int(T)];
    if (Pages > C.FreePages[int(T)].size())
      return Status::error(
          ErrorCode::Capacity,
          std::string("restore: the file holds ") + std::to_string(Pages) +
              " " + toString(T) + " pages, " +
              std::to_string(C.FreePages[int(T)].size()) + " are free");
  }
  return Status::success();
}

/// Writes one saved sequence into the buffers of slot and pages of S.
static Status writeSequence(Cache::Impl &C, const SavedSequence &Saved,
                            const SequenceState &S) {
  const Manifest &M = C.manifest();
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    uint64_t PageBytes = C.layout(T).PageBytes;
    for (size_t I = 0; I < S.Pages[int(T)].size(); ++I)
      if (Status St =
              C.B->copyToDevice(C.pageAddr(T, S.Pages[int(T)][I]),
                                Saved.Pages[int(T)] + I * PageBytes, PageBytes);
          !St.ok())
        return St;
    if (Status St = C.uploadTable(S, T); !St.ok())
      return St;
  }
  for (unsigned L = 0; L < M.Model.Layers; ++L) {
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const TensorCounts &N = S.Layers[L][T];
      if (Status St =
              C.B->copyToDevice(C.sinkAddr(T, L, S.Slot), Saved.Sink[int(T)][L],
                                N.Sink * C.rowBytes());
          !St.ok())
        return St;
      if (Status St = C.B->copyToDevice(C.windowAddr(T, L, S.Slot),
                                        Saved.Window[int(T)][L],
                                        N.Window * C.rowBytes());
          !St.ok())
        return St;
    }
    if (!M.hasKeyNorm())
      continue;
    // A slot may hold an earlier sequence's norms: clear them, as
    // addSequence does.
    Status St =
        Saved.Norms[L]
            ? C.B->copyToDevice(C.normsAddr(L, S.Slot), Saved.Norms[L],
                                C.normBytesPerSlot())
            : C.B->memset(C.normsAddr(L, S.Slot), 0, C.normBytesPerSlot());
    if (!St.ok())
      return St;
  }
  auto Pools = C.poolRegions(S.Slot);
  for (size_t I = 0; I < Pools.size(); ++I)
    if (Status St =
            C.B->copyToDevice(Pools[I].first, Saved.Pools[I], Pools[I].second);
        !St.ok())
      return St;
  return Status::success();
}

/// The states of Saved, on the last free slots and pages.
static std::map<SequenceId, SequenceState>
placeSequences(const Cache::Impl &C, const std::vector<SavedSequence> &Saved) {
  std::map<SequenceId, SequenceState> Fresh;
  size_t Taken[2] = {0, 0};
  for (size_t I = 0; I < Saved.size(); ++I) {
    SequenceState &S = Fresh[I];
    S.Slot = C.FreeSlots[C.FreeSlots.size() - 1 - I];
    S.Layers = Saved[I].Layers;
    S.HasNorms = Saved[I].HasNorms;
    // Files hold windows oldest token first: restored rings start at row 0.
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      S.WindowHead[int(T)].assign(Saved[I].Layers.size(), 0);
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const std::vector<uint32_t> &Free = C.FreePages[int(T)];
      for (uint32_t P = 0; P < Saved[I].NumPages[int(T)]; ++P)
        S.Pages[int(T)].push_back(Free[Free.size() - 1 - Taken[int(T)]++]);
    }
  }
  return Fresh;
}

Expected<std::vector<SequenceId>> Cache::deserialize(const uint8_t *Data,
                                                     size_t Size) {
  if (Status St = P->checkCacheAllocates("restore"); !St.ok())
    return St;
  try {
    Expected<std::vector<SavedSequence>> Saved = parseFile(*P, Data, Size);
    if (!Saved.ok())
      return Saved.status();
    if (Status St = checkRoom(*P, *Saved); !St.ok())
      return St;
    std::map<SequenceId, SequenceState> Fresh = placeSequences(*P, *Saved);
    std::vector<SequenceId> Ids;
    Ids.reserve(Saved->size());
    for (size_t I = 0; I < Saved->size(); ++I)
      if (Status St = writeSequence(*P, (*Saved)[I], Fresh[I]); !St.ok())
        return St;
    P->adopt(Fresh, Ids);
    return Ids;
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "restore: out of host memory");
  }
}

Expected<std::vector<SequenceId>> Cache::restore(const std::string &Path) {
  if (Status S = checkPathHasNoNul(Path, "restore: cache file path"); !S.ok())
    return S;
  std::vector<uint8_t> Bytes;
  try {
    if (Status St = readRegularFile(Path, Bytes); !St.ok())
      return St;
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "restore: out of host memory");
  } catch (const std::exception &E) {
    return fileError("cannot read '" + Path + "': " + E.what());
  }
  Expected<std::vector<SequenceId>> Ids =
      deserialize(Bytes.data(), Bytes.size());
  if (!Ids.ok())
    return Ids.status().withContext("'" + Path + "': ");
  return Ids;
}
