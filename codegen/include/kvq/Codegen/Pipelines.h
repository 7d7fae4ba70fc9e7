//===- Pipelines.h - kernel IR to PTX and to host code ----------*- C++ -*-===//

#ifndef KVQ_CODEGEN_PIPELINES_H
#define KVQ_CODEGEN_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace kvq {

/// Lowers the `gpu.module`s of `module` to PTX, one text per chip
/// (sm_80, sm_90, ...), through NVVM and LLVM's NVPTX backend.
mlir::FailureOr<llvm::SmallVector<std::string>>
compileToPTX(mlir::ModuleOp module, llvm::ArrayRef<std::string> chips);

/// Lowers the host kernels of `module` to LLVM, optimizes them for the host
/// CPU and returns an ELF object file.
mlir::FailureOr<std::string> compileToHostObject(mlir::ModuleOp module);

/// Registers what the code generator needs: dialects, their conversions to
/// LLVM and their translations, and the NVVM target.
void registerCodegenDependencies(mlir::DialectRegistry &registry);

} // namespace kvq

#endif // KVQ_CODEGEN_PIPELINES_H
