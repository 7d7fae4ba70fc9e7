//===- Pipelines.h - the kvq compile pipeline and its stages ----*- C++ -*-===//
//
// `kvq-compile-pipeline` lowers kvq.cache specs to what the artifact writer
// needs, in three stages named by IR level (as Triton's make_ttir ->
// make_ttgir -> make_llir -> make_ptx), each a registered pipeline of
// ordinary passes that runs and prints alone (docs/Rationale.md):
//
//   kvq-build-kernels   kvq.cache -> kernel IR: host module + gpu.module
//   kvq-host-to-llvm    host modules -> LLVM dialect
//   kvq-gpu-to-binary   gpu.modules -> gpu.binary, PTX per chip
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_PIPELINES_H
#define KVQ_CODEGEN_PIPELINES_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace kvq {

/// Options of kvq-compile-pipeline and of the stages that read them.
struct KVQCompilePipelineOptions
    : mlir::PassPipelineOptions<KVQCompilePipelineOptions> {
  Option<std::string> hostCpu{
      *this, "host-cpu",
      llvm::cl::desc("CPU the host code is compiled for: native, or an LLVM "
                     "CPU name (x86-64-v2, x86-64-v3, skylake-avx512, ...)"),
      llvm::cl::init("native")};
  ListOption<std::string> chips{
      *this, "chips",
      llvm::cl::desc("GPU chips to emit PTX for (default: sm_80,sm_90)")};
  Option<unsigned> dotFactorBits{
      *this, "dot-factor-bits",
      llvm::cl::desc("Bits of the factors of the host CPU's integer dots, "
                     "where it has AVX-512 VNNI: 16 or 8 (kvq-assign-target)"),
      llvm::cl::init(16)};
  Option<bool> attendPrograms{
      *this, "attend-programs",
      llvm::cl::desc("Build the attend kernels of full-precision layers as "
                     "programs (kvq-lower-kernels; false: emitted)"),
      llvm::cl::init(true)};
  Option<bool> quantizedAttendPrograms{
      *this, "quantized-attend-programs",
      llvm::cl::desc("Build the attend kernels of quantized layers in channel "
                     "order as programs too (kvq-lower-kernels; default: "
                     "emitted)"),
      llvm::cl::init(false)};

  /// `chips`, or the chips every artifact carries if none are named.
  llvm::SmallVector<std::string> getChips() const;
};

/// kvq.cache -> kernels: attach the target (#kvq.target from `options`),
/// expand schedules, assign the layout, plan the kernels, lower them to host
/// functions and GPU kernels, expand dequantization.
void buildKVQKernelsPipeline(mlir::OpPassManager &pm,
                             const KVQCompilePipelineOptions &options);

/// The host modules' scf/arith/func/llvm -> LLVM dialect.
void buildKVQHostToLLVMPipeline(mlir::OpPassManager &pm);

/// The gpu.modules -> NVVM -> gpu.binary holding PTX text per chip. No CUDA
/// toolkit is needed: the kernels call no libdevice function.
void buildKVQGPUToBinaryPipeline(mlir::OpPassManager &pm);

/// All three stages: what the artifact writer (kvq/Codegen/Artifact.h)
/// takes.
void buildKVQCompilePipeline(mlir::OpPassManager &pm,
                             const KVQCompilePipelineOptions &options);

/// Registers kvq-compile-pipeline and its stages by name.
void registerKVQCompilePipelines();

/// Registers what the code generator needs: dialects, their conversions to
/// LLVM and their translations, and the NVVM target.
void registerCodegenDependencies(mlir::DialectRegistry &registry);

} // namespace kvq

#endif // KVQ_CODEGEN_PIPELINES_H
