//===- Kernels.h - the kernels of a compiled cache --------------*- C++ -*-===//
//
// Each kernel of docs/KernelABI.md is described once, as the program of one
// block, and emitted through a KernelTarget for every backend.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_KERNELS_H
#define KVQ_CODEGEN_KERNELS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Layout.h"

#include <string>

namespace kvq {

enum class KernelKind { KeyNorm, Flush, Attend, Combine };

/// One kernel to emit: what it computes and for which layer's schemes.
struct KernelSpec {
  std::string name;
  KernelKind kind;
  /// A layer whose schemes the kernel implements (layers with identical
  /// schemes share one kernel).
  unsigned layer = 0;
  /// Flush kernels: keys or values.
  bool isKeys = true;

  llvm::SmallVector<ArgKind> getArgs() const;
  llvm::StringRef getKindName() const;
};

/// The kernels of a cache, and which one serves each layer.
struct KernelPlan {
  llvm::SmallVector<KernelSpec> kernels;
  struct LayerKernels {
    std::string flush[2]; ///< keys, values
    std::string attend;
    std::string keyNorm; ///< empty without key normalisation
  };
  llvm::SmallVector<LayerKernels> layers;
  std::string combine;
};

KernelPlan planKernels(const CacheLayout &layout);

/// Emits kernel `spec` of `layout` through `target`.
void emitKernel(const KernelSpec &spec, const CacheLayout &layout,
                KernelTarget &target, mlir::OpBuilder &b, mlir::Location loc);

// One emitter per kernel kind (one file each under lib/Kernels).
void emitKeyNormKernel(KernelBuilder &kb, const KernelEntry &entry,
                       const CacheLayout &layout);
void emitFlushKernel(KernelBuilder &kb, const KernelEntry &entry,
                     const CacheLayout &layout, unsigned layer, bool isKeys);
void emitAttendKernel(KernelBuilder &kb, const KernelEntry &entry,
                      const CacheLayout &layout, unsigned layer);
void emitCombineKernel(KernelBuilder &kb, const KernelEntry &entry,
                       const CacheLayout &layout);

} // namespace kvq

#endif // KVQ_CODEGEN_KERNELS_H
