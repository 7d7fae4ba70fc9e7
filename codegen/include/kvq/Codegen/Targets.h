//===- Targets.h - the CPU and GPU kernel targets ---------------*- C++ -*-===//

#ifndef KVQ_CODEGEN_TARGETS_H
#define KVQ_CODEGEN_TARGETS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include <memory>

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace kvq {

/// What the host CPU's kernels know of `target`: blocks of one thread, its
/// vector lanes and registers, its dot unit.
TargetInfo getCPUTargetInfo(TargetAttr target);
/// What the GPU's kernels know of `target`: blocks of block_threads, warps
/// of warp_size, 8-lane runs of registers, its matrix unit.
TargetInfo getGPUTargetInfo(TargetAttr target);

/// Runs `fn(module, cache)` on each host and GPU module directly in `top`
/// that names a kvq.cache; stops at the first failure (with a diagnostic,
/// from `fn` or for a module naming no cache).
mlir::LogicalResult forEachCacheModule(
    mlir::ModuleOp top,
    llvm::function_ref<mlir::LogicalResult(mlir::Operation *module,
                                           CacheOp cache)>
        fn);
/// The same with `info`, the module's target's (getCPUTargetInfo or
/// getGPUTargetInfo).
mlir::LogicalResult forEachKernelModule(
    mlir::ModuleOp top,
    llvm::function_ref<mlir::LogicalResult(mlir::Operation *module,
                                           const TargetInfo &info)>
        fn);

/// Kernels as host functions `void NAME(void **args, i32 bx, i32 by, i32 bz)`
/// in `module`; a block runs on one thread, its "threads" are a loop, its
/// vectors have the vector lanes of `target`.
std::unique_ptr<KernelTarget> createCPUTarget(mlir::ModuleOp module,
                                              TargetAttr target);

/// Kernels as `gpu.func` kernels of `module`, with the warp size and block
/// threads of `target`.
std::unique_ptr<KernelTarget> createGPUTarget(mlir::gpu::GPUModuleOp module,
                                              TargetAttr target);

} // namespace kvq

#endif // KVQ_CODEGEN_TARGETS_H
