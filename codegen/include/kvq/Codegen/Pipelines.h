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

/// Host code for one CPU: an ELF object file, the LLVM CPU name it was
/// compiled for, and the x86 features it may use (the table of
/// kvq/Support/HostFeatures.h), which the runtime checks before loading it.
struct HostObject {
  std::string object;
  std::string cpu;
  llvm::SmallVector<std::string> features;
};

/// Lowers the host kernels of `module` to LLVM and optimizes them for
/// `hostCPU`: "native" (this machine's CPU and features) or an LLVM CPU name
/// (x86-64-v2, x86-64-v3, skylake-avx512, ...); an unknown name is an error.
mlir::FailureOr<HostObject> compileToHostObject(mlir::ModuleOp module,
                                                llvm::StringRef hostCPU);

/// Registers what the code generator needs: dialects, their conversions to
/// LLVM and their translations, and the NVVM target.
void registerCodegenDependencies(mlir::DialectRegistry &registry);

} // namespace kvq

#endif // KVQ_CODEGEN_PIPELINES_H
