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
#include "kvq/Dialect/KVQ/KVQAttrs.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kvq {

/// The CPU host code is compiled for: its LLVM name, the x86 features the
/// code may use (the table of kvq/Support/HostFeatures.h, which the runtime
/// checks before loading it), and LLVM's feature string for it.
struct HostTarget {
  std::string cpu;
  llvm::SmallVector<std::string> features;
  std::string llvmFeatures;
};

/// The f32 lanes of `host`'s widest vector registers: 16 with AVX-512, 8
/// with AVX, else 4.
unsigned getVectorLanes(const HostTarget &host);

/// The dot unit of `host` whose factors have `factorBits` bits, or null:
/// AVX-512 VNNI and BW's `vpdpwssd` (16), which adds 16-bit integer products
/// in pairs into the 16 i32 lanes of a 512-bit register, or `vpdpbusd` (8),
/// which adds products of unsigned and signed bytes in fours.
DotUnitAttr getHostDotUnit(mlir::MLIRContext *ctx, const HostTarget &host,
                           unsigned factorBits = 16);

/// Resolves `hostCPU`: "native" (this machine's CPU and features) or an LLVM
/// CPU name (x86-64-v2, x86-64-v3, skylake-avx512, ...); an unknown name is
/// an error.
mlir::FailureOr<HostTarget> resolveHostTarget(mlir::ModuleOp module,
                                              llvm::StringRef hostCPU);

/// Translates `module` (LLVM dialect only) to LLVM IR, optimizes it at O3
/// for `target` and returns one relocatable ELF object: each kernel is
/// compiled alone, on the context's threads, and the objects are linked
/// with the system C compiler (`cc -r`).
mlir::FailureOr<std::string> compileToHostObject(mlir::ModuleOp module,
                                                 const HostTarget &target);

/// Runs the system C compiler (`cc`, found on PATH) with `args`, the
/// linker both host files come from; `what` names the step in the error
/// emitted at `loc`.
mlir::LogicalResult runSystemCompiler(mlir::Location loc,
                                      llvm::ArrayRef<llvm::StringRef> args,
                                      const llvm::Twine &what);

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
