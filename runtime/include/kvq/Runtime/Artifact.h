//===- Artifact.h - A compiled kvq artifact directory -----------*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// `kvq-opt --kvq-compile=DIR SPEC` writes an artifact directory: a
// manifest.json describing the cache layout and the kernel table, PTX per
// GPU target and host code (docs/KernelABI.md). This header is the runtime's
// typed view of the manifest; it is the only place scheme knowledge enters
// the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_ARTIFACT_H
#define KVQ_RUNTIME_ARTIFACT_H

#include "kvq/ABI/CacheLayout.h"
#include "kvq/ABI/ManifestSchema.h"
#include "kvq/Runtime/DeviceDriver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvq::runtime {

/// The manifest version this runtime understands.
constexpr int kArtifactVersion = manifest::kVersion;

/// Bounds the loader enforces (docs/KernelABI.md, "What the loader checks"):
/// token counts as the dialect's, page size, and file sizes.
constexpr uint64_t kMaxTokens = uint64_t(1) << 20;
constexpr uint64_t kMaxPageBytes = uint64_t(1) << 40;
constexpr uint64_t kMaxManifestBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxPTXBytes = uint64_t(256) << 20;

/// The model dtype of queries, keys and values (raw bits at the API).
enum class DType { F16, BF16, F32 };

/// Returns "f16", "bf16" or "f32".
const char *toString(DType Type);
/// Returns 2, 2 or 4.
unsigned byteSize(DType Type);

/// The two cached tensors.
enum class Tensor { Keys = 0, Values = 1 };
const char *toString(Tensor T);

/// The scheme one layer of one tensor stores in its slices (see
/// KernelABI.md).
struct SchemeLayout {
  /// False for a full-precision scheme (slice = [P][D] of the model dtype).
  bool Quantized = false;
  unsigned Bits = 0;
  /// "asym", "sym" or "hybrid".
  std::string Mode;
  /// True for span = tokens, false for span = channels.
  bool SpanTokens = false;
  unsigned Group = 0;
  unsigned Levels = 0;
  double Eta = 0.0;
  double Clip = 1.0;
  /// Parameter dtype name ("f32", "f16", "bf16", "f8E4M3").
  std::string Params;
  bool KeyNorm = false;
  /// Keys cached before the rotary embedding (the attend kernel rotates).
  bool PreRope = false;
  /// SKVQ channel reorder (both empty without), per kv-head: Perm[h][i] is
  /// the channel at position i of a token, GroupSizes[h] the sizes of its
  /// groups in position order (their first words are the slice's
  /// GroupWords). See KernelABI.md, "Channel reorder".
  std::vector<std::vector<unsigned>> Perm, GroupSizes;
  /// Per-group clip factors per kv-head (one per group of a token, or per
  /// channel for span = tokens); empty when the scheme clips by `Clip`.
  std::vector<std::vector<double>> ClipTable;
};

/// One layer of one tensor: where its slices live in a page, and what
/// they store.
struct LayerLayout {
  /// Offsets, sizes and code sharing (kvq/ABI/CacheLayout.h, the compiler's
  /// definition): CodesFrom is the earlier layer whose codes this layer's
  /// kernels read (it stores only its parameters), or -1.
  abi::SliceLayout Slice;
  std::string FlushKernel;
  /// The flush units a block of FlushKernel moves on a GPU (its kernel
  /// entry's device_units, resolved once when the manifest is parsed).
  unsigned FlushDeviceUnits = 1;
  /// FlushKernel's `tableRow` for this layer: the layers before it that
  /// name the same kernel (docs/KernelABI.md).
  unsigned FlushTableRow = 0;
  SchemeLayout Scheme;
};

/// The layout of one tensor (keys or values).
struct TensorLayout {
  unsigned Sink = 0;
  unsigned Recent = 0;
  unsigned Flush = 1;
  /// Recent + Flush - 1 tokens: the fp window buffer's capacity.
  unsigned WindowCapacity = 0;
  uint64_t PageBytes = 0;
  std::vector<LayerLayout> Layers;
};

/// The model shape the artifact was compiled for.
/// How a head's channels pair under RoPE in the keys and queries the cache
/// takes (#kvq.model's channel_order): the order the spec's channel groups,
/// reorder and clip tables refer to; Any when the spec holds for either.
enum class ChannelOrder { Any, Half, Interleaved };
/// Returns "any", "half" or "interleaved" (the manifest's names).
const char *toString(ChannelOrder Order);

struct ModelShape {
  unsigned Layers = 0;
  unsigned Heads = 0;
  unsigned KvHeads = 0;
  unsigned HeadDim = 0;
  DType Type = DType::F16;
  /// Softmax scale (1/sqrt(D) unless the spec says otherwise).
  double Scale = 0.0;
  ChannelOrder Channels = ChannelOrder::Any;
};

enum class ArgKind { Ptr, I32 };

/// One entry of the kernel table.
struct KernelInfo {
  std::string Name;
  /// "keynorm", "flush", "track" or "attend".
  std::string Kind;
  Dim3 Block;
  unsigned SharedBytes = 0;
  /// Flush kernels: the flush units a block of the PTX kernel moves (the
  /// host code's blocks move one); 1 for the other kinds.
  unsigned DeviceUnits = 1;
  std::vector<ArgKind> Args;
};

/// The per-layer kernels of attention.
struct LayerKernels {
  std::string Attend;
  /// Empty when the layer's keys have no key_norm.
  std::string KeyNorm;
  /// OTT tracking; empty when the layer has no outlier pools.
  std::string Track;
  /// Attend's `tableRow` for this layer, counted as FlushTableRow.
  unsigned AttendTableRow = 0;
};

/// OTT outlier pools (kvq/ABI/CacheLayout.h, the compiler's definition).
using abi::PoolLayout;

/// The parsed manifest.json.
struct Manifest {
  int Version = 0;
  std::string Name;
  ModelShape Model;
  unsigned PageTokens = 0;
  /// The most tokens of one attention split of the GPU kernels, and the
  /// step of planned split sizes (it divides both capacities).
  unsigned SplitTokens = 0;
  unsigned SplitGranule = 0;
  double CodeBits = 0.0;
  double StorageBits = 0.0;
  TensorLayout Keys;
  TensorLayout Values;
  std::vector<LayerKernels> Layers;
  PoolLayout Pool;
  std::vector<KernelInfo> Kernels;
  /// sm target ("sm_80") -> PTX file name.
  std::map<std::string, std::string> PTX;
  std::string HostObject;
  std::string HostShared;
  /// FNV-1a 64 of HostShared's bytes (kvq/ABI/ManifestBinding.h).
  uint64_t HostSharedChecksum = 0;
  /// The CPU the host code was compiled for, and the x86 features it may
  /// use (LLVM names, kvq/Support/HostFeatures.h).
  std::string HostCpu;
  std::vector<std::string> HostFeatures;
  /// The most tokens of one attention split of the host code.
  unsigned HostSplitTokens = 0;

  const TensorLayout &tensor(Tensor T) const {
    return T == Tensor::Keys ? Keys : Values;
  }
  /// The split capacity of the host code (OnHost) or of the GPU kernels.
  unsigned splitTokens(bool OnHost) const {
    return OnHost ? HostSplitTokens : SplitTokens;
  }
  /// The kernel named Name, or null.
  const KernelInfo *kernel(const std::string &Name) const;
  /// True when some layer's keys use key_norm.
  bool hasKeyNorm() const;
};

/// Parses and checks manifest text. Errors name the offending field; a
/// version other than kArtifactVersion fails with "artifact version N,
/// runtime expects 3".
Expected<Manifest> parseManifest(const std::string &Text);

/// An opened artifact directory. Immutable once opened; share it between
/// caches with std::shared_ptr.
class Artifact {
public:
  /// Opens Dir and parses Dir/manifest.json.
  static Expected<std::shared_ptr<const Artifact>> open(const std::string &Dir);

  const std::string &directory() const { return Dir; }
  const Manifest &manifest() const { return M; }
  /// hashManifest() of manifest.json's bytes: identifies the layout.
  uint64_t manifestHash() const { return ManifestHash; }

  /// The sm targets PTX is provided for ("sm_80", ...).
  std::vector<std::string> ptxTargets() const;
  /// Reads the PTX text for Target; an error unless it carries this
  /// manifest's hash (kvq/ABI/ManifestBinding.h).
  Expected<std::string> loadPTX(const std::string &Target) const;
  /// Real path of the host shared object (kernels.so) and object
  /// (kernels.o): regular files inside the artifact directory, else an error.
  Expected<std::string> hostSharedPath() const;
  /// Checks the bytes of the file at Path, the host shared object, against
  /// the checksum the manifest records: an Artifact error where they differ.
  Status checkHostSharedChecksum(const std::string &Path) const;
  Expected<std::string> hostObjectPath() const;
  /// Checks the manifest hash that host code carries (`HashSymbol` of
  /// getManifestHashSymbol(), null if the code lacks it) against this
  /// manifest's.
  Status checkHostBinding(const void *HashSymbol) const;

private:
  Artifact(std::string Dir, Manifest M, uint64_t ManifestHash)
      : Dir(std::move(Dir)), M(std::move(M)), ManifestHash(ManifestHash) {}

  std::string Dir;
  Manifest M;
  /// hashManifest() of manifest.json's bytes.
  uint64_t ManifestHash;
};

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_ARTIFACT_H
