//===- kvq-opt.cpp - kvq optimizer driver ---------------------------------===//
//
// Parses, verifies and transforms kvq specs. `--kvq-report-bits` prints their
// bit accounting; `--kvq-compile=DIR` runs kvq-compile-pipeline on them
// (printable with --mlir-print-ir-after-all, timed with --mlir-timing) and
// hands the result to the artifact writer, which fills directory DIR.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Pipelines.h"
#include "kvq/Dialect/KVQ/InputLimits.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"
#include "kvq/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassInstrumentation.h"
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

namespace {

/// Runs the artifact writer on the top-level module once `last`, the
/// compile pipeline's last top-level pass, has succeeded on it. MlirOptMain
/// offers no hook between running the pipeline and printing its result;
/// the writer is not a pass and runs once, only after every pass succeeded
/// (a failed pass calls runAfterPassFailed instead). --mlir-timing counts its
/// time in the last pass's.
struct ArtifactWriterHook : mlir::PassInstrumentation {
  ArtifactWriterHook(mlir::Pass *last, std::string dir)
      : last(last), dir(std::move(dir)) {}

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    if (pass != last || op->getParentOp())
      return;
    if (mlir::failed(kvq::writeArtifact(llvm::cast<mlir::ModuleOp>(op), dir)))
      sawError = true;
  }

  mlir::Pass *last;
  std::string dir;
};

} // namespace

/// kvq-compile-pipeline, then the artifact writer on its result.
static void setUpCompile(mlir::PassManager &pm) {
  kvq::KVQCompilePipelineOptions options;
  options.hostCpu = hostCpu;
  kvq::buildKVQCompilePipeline(pm, options);
  mlir::Pass *last = nullptr;
  for (mlir::Pass &pass : pm.getPasses())
    last = &pass;
  pm.addInstrumentation(std::make_unique<ArtifactWriterHook>(last, compileDir));
}

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
  setUpCompile(pm);
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

/// The upstream passes kvq-compile-pipeline uses, so that each of its stages
/// and passes also runs alone (--pass-pipeline, --mlir-print-ir-after-all).
static void registerUpstreamPasses() {
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  mlir::registerSCFToControlFlowPass();
  mlir::arith::registerArithExpandOpsPass();
  mlir::registerConvertToLLVMPass();
  mlir::registerReconcileUnrealizedCastsPass();
  mlir::registerConvertGpuOpsToNVVMOps();
  mlir::registerGpuModuleToBinaryPass();
}

int main(int argc, char **argv) {
  registerUpstreamPasses();
  kvq::registerKVQPasses();
  kvq::registerKVQCodegenPasses();
  kvq::registerKVQCompilePipelines();

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
