//===- Targets.h - the CPU and GPU kernel targets ---------------*- C++ -*-===//

#ifndef KVQ_CODEGEN_TARGETS_H
#define KVQ_CODEGEN_TARGETS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"

#include <memory>

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace kvq {

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
