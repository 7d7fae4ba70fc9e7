//===- kvq-opt.cpp - kvq optimizer driver ---------------------------------===//
//
// Parses, verifies and transforms kvq specs. `--kvq-report-bits` prints their
// bit accounting; `--kvq-compile=DIR` compiles them into an artifact
// directory (shorthand for `--kvq-compile-artifact=dir=DIR`).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Pipelines.h"
#include "kvq/Dialect/KVQ/InputLimits.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"
#include "kvq/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

static llvm::cl::opt<std::string>
    compileDir("kvq-compile",
               llvm::cl::desc("Compile the spec into artifact directory DIR"),
               llvm::cl::value_desc("DIR"), llvm::cl::init(""));

static llvm::cl::opt<std::string> hostCpu(
    "kvq-host-cpu",
    llvm::cl::desc("With --kvq-compile: the CPU the host code is compiled "
                   "for (native, or an LLVM CPU name such as x86-64-v3)"),
    llvm::cl::value_desc("CPU"), llvm::cl::init("native"));

/// Set when a diagnostic at error level was reported: kvq-opt then fails even
/// if the pass that reported it did not signal a failure.
static bool sawError = false;

/// Chains to `base`'s pipeline setup after counting error diagnostics of the
/// pipeline's context (not under -verify-diagnostics, where expected errors
/// are the point).
static mlir::LogicalResult setUpPipeline(mlir::PassManager &pm,
                                         const mlir::MlirOptMainConfig &base) {
  if (!base.shouldVerifyDiagnostics())
    pm.getContext()->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error)
            sawError = true;
          return mlir::failure(); // Let the printing handler report it.
        });
  if (compileDir.empty())
    return base.setupPassPipeline(pm);
  kvq::KVQCompileArtifactOptions options;
  options.dir = compileDir;
  options.hostCpu = hostCpu;
  pm.addPass(kvq::createKVQCompileArtifact(options));
  return mlir::success();
}

/// Rejects, with a located diagnostic, input beyond the bounds of
/// kvq/Dialect/KVQ/InputLimits.h before MLIR parses it.
static mlir::LogicalResult checkInputLimits(const llvm::MemoryBuffer &input) {
  std::optional<kvq::InputLimitViolation> violation =
      kvq::checkSpecInputLimits(input.getBuffer());
  if (!violation)
    return mlir::success();
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(input.getMemBufferRef(),
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  size_t offset = std::min(violation->offset, input.getBufferSize());
  auto [line, column] = sources.getLineAndColumn(
      llvm::SMLoc::getFromPointer(input.getBufferStart() + offset));
  // In MLIR's diagnostic format, without quoting the line: it may be
  // megabytes long.
  llvm::errs() << input.getBufferIdentifier() << ":" << line << ":" << column
               << ": error: " << violation->message << "\n";
  return mlir::failure();
}

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  kvq::registerKVQPasses();
  kvq::registerKVQCodegenPasses();

  mlir::DialectRegistry registry;
  registry.insert<kvq::KVQDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::vector::VectorDialect>();
  kvq::registerCodegenDependencies(registry);

  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "kvq optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  config.setPassPipelineSetupFn([base = config](mlir::PassManager &pm) {
    return setUpPipeline(pm, base);
  });

  // Diagnostics quote their source line: unbuffered, a long line costs one
  // write per byte.
  llvm::errs().SetBuffered();
  std::string error;
  auto input = mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (failed(checkInputLimits(*input)))
    return 1;
  auto output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                     config)) ||
      sawError)
    return 1;
  output->keep();
  return 0;
}
