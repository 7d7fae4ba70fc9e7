//===- Artifact.h - compile a cache into an artifact directory --*- C++ -*-===//

#ifndef KVQ_CODEGEN_ARTIFACT_H
#define KVQ_CODEGEN_ARTIFACT_H

#include "kvq/Dialect/KVQ/KVQOps.h"

namespace kvq {

/// The PTX targets every artifact carries.
llvm::ArrayRef<std::string> getArtifactChips();

/// Compiles `cache` into directory `dir` (created if missing): manifest,
/// PTX per chip, host object and shared object (docs/KernelABI.md), the
/// host code for `hostCPU` ("native" or an LLVM CPU name).
mlir::LogicalResult compileArtifact(CacheOp cache, llvm::StringRef dir,
                                    llvm::StringRef hostCPU = "native");

} // namespace kvq

#endif // KVQ_CODEGEN_ARTIFACT_H
