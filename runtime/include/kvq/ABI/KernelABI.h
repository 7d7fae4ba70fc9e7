//===- KernelABI.h - the argument lists of kvq's kernels --------*- C++ -*-===//
//
// Part of kvq. Plain C++17, shared by the code generator (which declares and
// emits the kernels) and the runtime (which checks the manifest's argument
// lists and fills the launch arguments).
//
//===----------------------------------------------------------------------===//
//
// One table: every kernel kind of docs/KernelABI.md, with its arguments in
// order (name, kind, meaning). Code indexes arguments by the names declared
// here (`FlushArgs::Pages`), never by position, so reordering or adding an
// argument is one edit here.
//
// Argument kinds: `Ptr` (8 bytes, a buffer the kernel writes), `InPtr` (8
// bytes, a buffer it only reads and no other argument aliases; the manifest
// calls both "ptr") and `I32` (4 bytes).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_ABI_KERNELABI_H
#define KVQ_ABI_KERNELABI_H

#include <cstdint>
#include <cstring>

// X(Id, Kind, Meaning)
#define KVQ_KEYNORM_ARGS(X)                                                    \
  X(Src, InPtr, "[n][Hkv][D] of T: the keys of a sequence's first append")     \
  X(Norms, Ptr, "[Hkv][D] f32: the sequence's key norms (norms_l + slot)")     \
  X(Partials, Ptr, "[numChunks][Hkv][D] f32: each chunk's maxima (scratch)")   \
  X(NumTokens, I32, "n, the tokens of src")                                    \
  X(NumChunks, I32, "chunks of ceil(n / numChunks) tokens")                    \
  X(Phase, I32, "0: chunk maxima into partials; 1: norms from them")

#define KVQ_FLUSH_ARGS(X)                                                      \
  X(Window, InPtr, "[C][Hkv][D] of T: the sequence's window ring")             \
  X(Input, InPtr, "[numTokens - windowTokens][Hkv][D] of T: the other tokens") \
  X(Pages, Ptr, "the tensor's page pool plus the layer's offset")              \
  X(Table, InPtr, "[maxPagesPerSeq] u32: the sequence's block-table row")      \
  X(Norms, InPtr, "[Hkv][D] f32: the sequence's key norms (key_norm only)")    \
  X(Saturated, Ptr, "u32: the layer's saturated-group counter")                \
  X(NonFinite, Ptr, "u32: set to 1 where a token read is not finite")          \
  X(WindowHead, I32, "ring row of the window's oldest token")                  \
  X(WindowTokens, I32, "tokens read from the ring, before those of input")     \
  X(DestPos, I32, "first quantized position written")                          \
  X(NumTokens, I32, "tokens to quantize, a multiple of the flush unit")        \
  X(TableRow, I32, "the layer's row of the kernel's channel tables")

#define KVQ_TRACK_ARGS(X)                                                      \
  X(KWindow, Ptr, "[C][Hkv][D] of T: the sequence's key window ring")          \
  X(VWindow, Ptr, "[C][Hkv][D] of T: the sequence's value window ring")        \
  X(KInput, Ptr, "[numTokens - windowTokens][Hkv][D] of T: the other keys")    \
  X(VInput, Ptr, "[numTokens - windowTokens][Hkv][D] of T: the other values")  \
  X(KPool, Ptr, "[entries][Hkv][D] of T: the sequence's key pool entries")     \
  X(VPool, Ptr, "[entries][Hkv][D] of T: the sequence's value pool entries")   \
  X(PoolIndex, Ptr, "[Hkv][indexWords] u32: the sequence's pool indexes")      \
  X(WindowHead, I32, "ring row of the windows' oldest token")                  \
  X(WindowTokens, I32, "tokens read from the rings, before those of inputs")   \
  X(FirstPos, I32, "sequence position of the first flushed token")             \
  X(NumTokens, I32, "tokens to quantize, a multiple of the flush unit")

#define KVQ_ATTEND_ARGS(X)                                                     \
  X(Q, InPtr, "[B][Hq][D] of T: the queries")                                  \
  X(Partial, Ptr, "[B][Hq][numSplits][D + 2] f32 slots: m, l, outputs / l")    \
  X(Out, Ptr, "[B][Hq][D] f32: the attention outputs")                         \
  X(Arrivals, Ptr, "[B][Hkv] u32: blocks done per (b, kv-head); zero between") \
  X(Seqs, InPtr, "[B][SeqsFields::NumFields] u32: per sequence, see below")    \
  X(KPages, InPtr, "the key page pool plus the layer's offset")                \
  X(VPages, InPtr, "the value page pool plus the layer's offset")              \
  X(KTables, InPtr, "[maxSeqs][maxPagesPerSeq] u32: key block tables")         \
  X(VTables, InPtr, "[maxSeqs][maxPagesPerSeq] u32: value block tables")       \
  X(KSink, InPtr, "the layer's key sinks")                                     \
  X(VSink, InPtr, "the layer's value sinks")                                   \
  X(KWindow, InPtr, "the layer's key windows")                                 \
  X(VWindow, InPtr, "the layer's value windows")                               \
  X(Norms, InPtr, "the layer's key norms (key_norm only)")                     \
  X(MaxPagesPerSeq, I32, "row length of the block tables")                     \
  X(NumSplits, I32, "splits per sequence")                                     \
  X(SplitTokens, I32, "tokens per split (planned; see docs/KernelABI.md)")     \
  X(KPool, InPtr, "the layer's key pool entries (OTT layers only)")            \
  X(VPool, InPtr, "the layer's value pool entries (OTT layers only)")          \
  X(PoolIndex, InPtr, "the layer's pool indexes (OTT layers only)")            \
  X(RotateQuery, I32, "1: rotate q to position tokens - 1 (pre_rope), else 0") \
  X(PrefetchSplit, I32, "1: blocks prefetch their split (several waves)")      \
  X(TableRow, I32, "the layer's row of the kernel's channel tables")

// The fields of one row of the attend kernel's `seqs`
// descriptor, in order: X(Id, Meaning). Counts are this layer's.
#define KVQ_SEQS_FIELDS(X)                                                     \
  X(Slot, "the sequence's slot")                                               \
  X(Tokens, "its tokens (each tensor's sink + quantized + window)")            \
  X(KSink, "key sink tokens")                                                  \
  X(KQuantized, "quantized key tokens")                                        \
  X(KWindow, "key window tokens")                                              \
  X(VSink, "value sink tokens")                                                \
  X(VQuantized, "quantized value tokens")                                      \
  X(VWindow, "value window tokens")                                            \
  X(KWindowHead, "ring row of the oldest key window token")                    \
  X(VWindowHead, "ring row of the oldest value window token")

// X(Id, Name, ArgsMacro)
#define KVQ_KERNEL_KINDS(X)                                                    \
  X(KeyNorm, "keynorm", KVQ_KEYNORM_ARGS)                                      \
  X(Flush, "flush", KVQ_FLUSH_ARGS)                                            \
  X(Track, "track", KVQ_TRACK_ARGS)                                            \
  X(Attend, "attend", KVQ_ATTEND_ARGS)

namespace kvq::abi {

enum class ArgKind { Ptr, InPtr, I32 };

/// One argument of a kernel.
struct ArgDesc {
  const char *Name;
  ArgKind Kind;
  const char *Meaning;
};

/// The manifest's name of an argument kind: "ptr" or "i32".
constexpr const char *getManifestName(ArgKind Kind) {
  return Kind == ArgKind::I32 ? "i32" : "ptr";
}

// Per kind, `<Kind>Args::<Arg>` is the index of an argument, `NumArgs` their
// number and `kTable` their descriptions.
#define KVQ_ABI_ARG_INDEX(Id, Kind, Meaning) Id,
#define KVQ_ABI_ARG_DESC(Id, Kind, Meaning) {#Id, ArgKind::Kind, Meaning},
#define KVQ_ABI_ARGS_STRUCT(Id, Name, ArgList)                                 \
  struct Id##Args {                                                            \
    enum : unsigned { ArgList(KVQ_ABI_ARG_INDEX) NumArgs };                    \
    static constexpr ArgDesc kTable[] = {ArgList(KVQ_ABI_ARG_DESC)};           \
  };
KVQ_KERNEL_KINDS(KVQ_ABI_ARGS_STRUCT)
#undef KVQ_ABI_ARGS_STRUCT
#undef KVQ_ABI_ARG_DESC
#undef KVQ_ABI_ARG_INDEX

/// `SeqsFields::Tokens` is the index of a field in a `seqs` row,
/// `SeqsFields::NumFields` the row's length in u32 words.
struct SeqsFields {
#define KVQ_ABI_SEQS_FIELD(Id, Meaning) Id,
  enum : unsigned { KVQ_SEQS_FIELDS(KVQ_ABI_SEQS_FIELD) NumFields };
#undef KVQ_ABI_SEQS_FIELD
};

enum class KernelKind {
#define KVQ_ABI_KIND_ID(Id, Name, ArgList) Id,
  KVQ_KERNEL_KINDS(KVQ_ABI_KIND_ID)
#undef KVQ_ABI_KIND_ID
};

/// A kernel kind: its manifest name and its arguments, in order.
struct KernelDesc {
  KernelKind Kind;
  const char *Name;
  const ArgDesc *Args;
  unsigned NumArgs;
};

inline constexpr KernelDesc kKernels[] = {
#define KVQ_ABI_KIND_DESC(Id, Name, ArgList)                                   \
  {KernelKind::Id, Name, Id##Args::kTable, Id##Args::NumArgs},
    KVQ_KERNEL_KINDS(KVQ_ABI_KIND_DESC)
#undef KVQ_ABI_KIND_DESC
};

/// The most arguments any kernel takes.
inline constexpr unsigned kMaxArgs = [] {
  unsigned Max = 0;
  for (const KernelDesc &K : kKernels)
    Max = K.NumArgs > Max ? K.NumArgs : Max;
  return Max;
}();
static_assert(kMaxArgs < 32, "KernelArgs tracks set arguments in 32 bits");

constexpr const KernelDesc &getKernel(KernelKind Kind) {
  return kKernels[unsigned(Kind)];
}

/// The kind named `Name` in a manifest, or null.
inline const KernelDesc *findKernel(const char *Name) {
  for (const KernelDesc &K : kKernels)
    if (std::strcmp(K.Name, Name) == 0)
      return &K;
  return nullptr;
}

/// The argument values of one launch of a `Kind` kernel, set by name
/// (`Args.set(FlushArgs::Pages, Addr)`); `get()` is the `void **` array that
/// cuLaunchKernel and the host entry points take.
class KernelArgs {
public:
  explicit KernelArgs(KernelKind Kind) : Kind(Kind) {}
  KernelArgs(const KernelArgs &) = delete;
  KernelArgs &operator=(const KernelArgs &) = delete;

  /// Sets pointer argument `Index`; false if it is not a pointer.
  bool set(unsigned Index, uint64_t Ptr) {
    return store(Index, /*IsI32=*/false, &Ptr, sizeof(Ptr));
  }
  /// Sets i32 argument `Index`; false if it is not an i32.
  bool set(unsigned Index, int32_t Value) {
    return store(Index, /*IsI32=*/true, &Value, sizeof(Value));
  }

  KernelKind getKind() const { return Kind; }
  /// Whether every argument was set, each with a value of its kind.
  bool complete() const {
    return Valid && Set == (1u << getKernel(Kind).NumArgs) - 1;
  }
  void **get() { return Ptrs; }

private:
  bool store(unsigned Index, bool IsI32, const void *Value, unsigned Bytes) {
    const KernelDesc &K = getKernel(Kind);
    bool Ok =
        Index < K.NumArgs && (K.Args[Index].Kind == ArgKind::I32) == IsI32;
    Valid = Valid && Ok;
    if (!Ok)
      return false;
    std::memcpy(&Slots[Index], Value, Bytes);
    Ptrs[Index] = &Slots[Index];
    Set |= 1u << Index;
    return true;
  }

  KernelKind Kind;
  bool Valid = true;
  uint32_t Set = 0;
  // An i32 lies in the first 4 bytes of its slot, where Ptrs points.
  uint64_t Slots[kMaxArgs] = {};
  void *Ptrs[kMaxArgs] = {};
};

} // namespace kvq::abi

#endif // KVQ_ABI_KERNELABI_H
