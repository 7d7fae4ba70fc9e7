//===- Artifact.h - write compiled caches as artifact directories -*- C++
//-*-===//
//
// The artifact writer runs after kvq-compile-pipeline (kvq/Codegen/
// Pipelines.h), outside any pass: it turns each compiled cache into an
// artifact directory (docs/KernelABI.md).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_ARTIFACT_H
#define KVQ_CODEGEN_ARTIFACT_H

#include "kvq/Codegen/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kvq {

/// The PTX targets every artifact carries unless told otherwise.
llvm::ArrayRef<std::string> getArtifactChips();

/// Host code for one CPU: an ELF object file, the LLVM CPU name it was
/// compiled for, and the x86 features it may use (the table of
/// kvq/Support/HostFeatures.h), which the runtime checks before loading it.
struct HostObject {
  std::string object;
  std::string cpu;
  llvm::SmallVector<std::string> features;
};

/// Translates `module` (LLVM dialect only) to LLVM IR, optimizes it at O3
/// for `hostCPU` and emits an object file. `hostCPU` is "native" (this
/// machine's CPU and features) or an LLVM CPU name (x86-64-v2, x86-64-v3,
/// skylake-avx512, ...); an unknown name is an error.
mlir::FailureOr<HostObject> compileToHostObject(mlir::ModuleOp module,
                                                llvm::StringRef hostCPU);

/// Writes every kvq.cache of `compiled` (the output of kvq-compile-pipeline)
/// into directory `dir` (one cache) or `dir/<cache name>` (several), created
/// if missing: manifest, PTX per chip, host object, and the shared object
/// linked with the system C compiler (`cc`).
mlir::LogicalResult writeArtifact(mlir::ModuleOp compiled, llvm::StringRef dir);

/// Runs kvq-compile-pipeline on `module` (which it lowers in place), then
/// writes its artifacts into `dir`.
mlir::LogicalResult compileArtifact(mlir::ModuleOp module, llvm::StringRef dir,
                                    const KVQCompilePipelineOptions &options);

} // namespace kvq

#endif // KVQ_CODEGEN_ARTIFACT_H
