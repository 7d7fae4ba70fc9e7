//===- Layout.h - physical layout of a compiled cache -----------*- C++ -*-===//
//
// Where every code, parameter and full-precision token of a cache lives: the
// page layout of docs/KernelABI.md. Kernels, the manifest and the runtime all
// read these numbers from here.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LAYOUT_H
#define KVQ_CODEGEN_LAYOUT_H

#include "kvq/ABI/CacheLayout.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

namespace kvq {

/// The layout of one (layer, kv-head) slice of a page: its numbers
/// (kvq/ABI/CacheLayout.h, one definition for the compiler and the runtime)
/// and the scheme they store.
struct SliceLayout : abi::SliceLayout {
  /// The scheme: a QuantAttr or a FullPrecisionAttr.
  mlir::Attribute scheme;
  /// Set for quantized schemes.
  QuantAttr quant;

  bool isQuantized() const { return static_cast<bool>(quant); }
};

/// The per-(layer, kv-head) tables of a slice, row-major [kv-head][...]:
/// SKVQ's channel reorder (`perm[i]` the channel at position i, the group
/// sizes; their first words are the layout's GroupWords) and per-group clip
/// factors
/// (rounded to f32, as the quantizer applies them). Empty when absent.
struct SliceTables {
  llvm::SmallVector<int32_t> perm, sizes;
  llvm::SmallVector<float> clips;
  /// Entries per kv-head of `clips`: groups per token (span = channels) or
  /// channels (span = tokens).
  unsigned clipsPerHead = 0;
};

/// The tables of layer `layer`'s slice (the scheme's, cut to the layer).
SliceTables getSliceTables(const SliceLayout &slice, ModelAttr model,
                           unsigned layer);

/// The layout of keys or values across all layers.
struct TensorLayout {
  WindowAttr window;
  /// Full-precision window slots: recent + flush - 1.
  unsigned windowCapacity = 0;
  uint64_t pageBytes = 0;
  llvm::SmallVector<SliceLayout> layers;
};

/// The physical layout of a whole cache.
struct CacheLayout {
  ModelAttr model;
  unsigned pageTokens = 0;
  /// The most tokens one block of the GPU's attention kernel covers (the
  /// flash-decoding split the runtime plans per batch, up to this), and
  /// one of the host CPU's (KernelTarget::getSplitTokens picks).
  unsigned splitTokens = 0;
  unsigned hostSplitTokens = 0;
  /// The step of planned split sizes: divides both capacities; a whole
  /// number of every token-spanning group where one fits (see
  /// computeSplitGranule).
  unsigned splitGranule = 0;
  unsigned dtypeBytes = 0;
  TensorLayout keys, values;
  /// OTT outlier pools (null without them).
  PoolLayoutAttr pool;

  const TensorLayout &get(bool isKeys) const { return isKeys ? keys : values; }
  bool hasKeyNorm(unsigned layer) const;
  /// Whether `layer` tracks outlier tokens (OTT).
  bool hasPool(unsigned layer) const { return pool && pool.isTracked(layer); }
};

/// The most f32 elements a rotated slice's flush holds in block-local
/// memory (32 KiB, within the GPU's static shared memory).
constexpr unsigned kRotatedChunkFloats = 8192;

/// The tokens a rotated slice's flush rotates at once (`rotate = hadamard`):
/// one group of tokens for span = tokens (0 where its rows pass
/// kRotatedChunkFloats), else the most that fit, a divisor of `flush`.
unsigned getRotatedChunkTokens(QuantAttr quant, unsigned headDim,
                               unsigned flush);

/// The target `cache` is compiled for: its `kvq.target`, or the defaults.
TargetAttr getCacheTarget(CacheOp cache);

/// Computes the layout of `cache`, or reports with a diagnostic at the
/// offending op every feature the code generator does not support yet. Only
/// kvq-assign-layout calls it; everything else reads the attribute.
mlir::FailureOr<CacheLayout> computeCacheLayout(CacheOp cache);

/// The `#kvq.layout` attribute holding `layout`'s numbers.
LayoutAttr getLayoutAttr(const CacheLayout &layout, mlir::MLIRContext *ctx);

/// The layout kvq-assign-layout attached to `cache` (`kvq.layout`), with
/// the schemes and windows of the op; an error at the op when it is missing
/// or is not the layout the cache's schemes give.
mlir::FailureOr<CacheLayout> getCacheLayout(CacheOp cache);

} // namespace kvq

#endif // KVQ_CODEGEN_LAYOUT_H
