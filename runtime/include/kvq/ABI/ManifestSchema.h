//===- ManifestSchema.h - the names of manifest.json ------------*- C++ -*-===//
//
// Part of kvq. Plain C++17, shared by the artifact writer (codegen) and the
// manifest reader (runtime): the manifest's version, file name and every key
// and enumerated value, so that writer and reader cannot drift. The shape of
// the document is docs/KernelABI.md, "Manifest".
//
// Version history (the reader accepts only kVersion):
//   1   first artifact format (2026-11-22): model, tensors and per-layer slice
//       layouts, flush / keynorm / attend / combine kernels, host CPU and
//       features, PTX and host files.
//   2   reordered schemes record words_per_token, each kv-head's perm, sizes
//       and group_words; per-kv-head clip_table; pre_rope in the scheme and the
//       attend kernel's rotateQuery argument; OTT: the pool object,
//       track_kernel and the attend kernel's kPool, vPool, poolIndex arguments.
//   3   window rings: the flush and track kernels read the windows in place
//       (windowHead, windowTokens arguments); two seqs fields, kWindowHead and
//       vWindowHead.
//   4   attention's split size planned at run time: the attend kernel's
//       splitTokens argument and the top-level split_granule.
//   5   key norms in two launches of one kernel: the keynorm kernel's partials,
//       numChunks and phase arguments (chunk maxima, then norms).
//   6   the attend launch merges its own splits: attend's out and arrivals
//       arguments; the combine kernel and combine_kernel dropped.
//   7   each kernel's device_units (flush units a block of the PTX flush kernel
//       moves; 1 for the other kinds).
//   8   the host code's own split capacity, host.split_tokens.
//   9   the attend kernel's prefetchSplit argument.
//   10  the keynorm kernel's phase 0 keeps a NaN key in its chunk maxima
//       (compared as integer bits), which the runtime reads to validate keys.
//   11  the flush kernel's nonFinite argument (set when a token it reads is
//       not finite).
//   12  files.host_shared_fnv1a: FNV-1a 64 of kernels.so as 16 hex digits,
//       checked before it is loaded (the manifest hash reads them as 0).
//   13  model.channel_order: the order of a head's rotary channel pairs the
//       spec was written for (any, half or interleaved).
//   14  each layer's page layout in one `slice` object, the fields of
//       kvq/ABI/CacheLayout.h (offset, slice_bytes and codes_from move there
//       from the layer, the code and parameter fields from the scheme, and
//       group_words from the reorder tables, as one [kv-head][group] list),
//       which the reader requires to equal the layout of the schemes.
//   15  the flush and attend kernels' tableRow argument: layers with
//       per-layer channel tables share a kernel, which holds each layer's
//       rows.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_ABI_MANIFESTSCHEMA_H
#define KVQ_ABI_MANIFESTSCHEMA_H

// X(Id, JsonKey): every object key, once (a key means the same in every
// object it appears in, e.g. `layers`).
#define KVQ_MANIFEST_KEYS(X)                                                   \
  X(Version, "version")                                                        \
  X(Name, "name")                                                              \
  X(Model, "model")                                                            \
  X(PageTokens, "page_tokens")                                                 \
  X(SplitTokens, "split_tokens")                                               \
  X(SplitGranule, "split_granule")                                             \
  X(Bits, "bits")                                                              \
  X(Tensors, "tensors")                                                        \
  X(Layers, "layers")                                                          \
  X(Kernels, "kernels")                                                        \
  X(Host, "host")                                                              \
  X(Files, "files")                                                            \
  X(Heads, "heads")                                                            \
  X(KvHeads, "kv_heads")                                                       \
  X(HeadDim, "head_dim")                                                       \
  X(Dtype, "dtype")                                                            \
  X(DtypeBytes, "dtype_bytes")                                                 \
  X(Scale, "scale")                                                            \
  X(ChannelOrder, "channel_order")                                             \
  X(CodeBits, "code_bits")                                                     \
  X(StorageBits, "storage_bits")                                               \
  X(Keys, "keys")                                                              \
  X(Values, "values")                                                          \
  X(Sink, "sink")                                                              \
  X(Recent, "recent")                                                          \
  X(Flush, "flush")                                                            \
  X(WindowCapacity, "window_capacity")                                         \
  X(PageBytes, "page_bytes")                                                   \
  X(Offset, "offset")                                                          \
  X(SliceBytes, "slice_bytes")                                                 \
  X(FlushKernel, "flush_kernel")                                               \
  X(CodesFrom, "codes_from")                                                   \
  X(CodesLayerDelta, "codes_layer_delta")                                      \
  X(CodesHeadDelta, "codes_head_delta")                                        \
  X(Slice, "slice")                                                            \
  X(Scheme, "scheme")                                                          \
  X(Kind, "kind")                                                              \
  X(Mode, "mode")                                                              \
  X(Span, "span")                                                              \
  X(Group, "group")                                                            \
  X(Levels, "levels")                                                          \
  X(Eta, "eta")                                                                \
  X(Clip, "clip")                                                              \
  X(Params, "params")                                                          \
  X(ParamBytes, "param_bytes")                                                 \
  X(KeyNorm, "key_norm")                                                       \
  X(PreRope, "pre_rope")                                                       \
  X(WordsPerGroup, "words_per_group")                                          \
  X(GroupsPerToken, "groups_per_token")                                        \
  X(GroupsPerPage, "groups_per_page")                                          \
  X(CodesBytes, "codes_bytes")                                                 \
  X(ScalesOffset, "scales_offset")                                             \
  X(ZerosOffset, "zeros_offset")                                               \
  X(Reorder, "reorder")                                                        \
  X(Perm, "perm")                                                              \
  X(Sizes, "sizes")                                                            \
  X(GroupWords, "group_words")                                                 \
  X(WordsPerToken, "words_per_token")                                          \
  X(ClipTable, "clip_table")                                                   \
  X(AttendKernel, "attend_kernel")                                             \
  X(KeynormKernel, "keynorm_kernel")                                           \
  X(TrackKernel, "track_kernel")                                               \
  X(Pool, "pool")                                                              \
  X(Capacity, "capacity")                                                      \
  X(Extra, "extra")                                                            \
  X(FirstLayer, "first_layer")                                                 \
  X(Entries, "entries")                                                        \
  X(IndexWords, "index_words")                                                 \
  X(Block, "block")                                                            \
  X(SharedBytes, "shared_bytes")                                               \
  X(DeviceUnits, "device_units")                                               \
  X(Args, "args")                                                              \
  X(Cpu, "cpu")                                                                \
  X(Features, "features")                                                      \
  X(Ptx, "ptx")                                                                \
  X(HostObject, "host_object")                                                 \
  X(HostShared, "host_shared")                                                 \
  X(HostSharedFnv1a, "host_shared_fnv1a")

namespace kvq::manifest {

/// The version the writer emits and the only one the reader accepts; bump it
/// with any change of the schema.
inline constexpr int kVersion = 15;

/// The manifest's file name in an artifact directory.
inline constexpr char kFileName[] = "manifest.json";

namespace key {
#define KVQ_MANIFEST_KEY(Id, Name) inline constexpr char Id[] = Name;
KVQ_MANIFEST_KEYS(KVQ_MANIFEST_KEY)
#undef KVQ_MANIFEST_KEY
} // namespace key

/// Values of `scheme.kind`.
namespace scheme_kind {
inline constexpr char Quant[] = "quant";
inline constexpr char FullPrecision[] = "full_precision";
} // namespace scheme_kind

/// Values of `model.channel_order` (the dialect's #kvq.model).
namespace channel_order {
inline constexpr char Any[] = "any";
inline constexpr char Half[] = "half";
inline constexpr char Interleaved[] = "interleaved";
} // namespace channel_order

} // namespace kvq::manifest

#endif // KVQ_ABI_MANIFESTSCHEMA_H
