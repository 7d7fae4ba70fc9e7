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
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
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

static llvm::cl::opt<unsigned> dotFactorBits(
    "kvq-dot-factor-bits",
    llvm::cl::desc("With --kvq-compile: bits of the factors of the host "
                   "CPU's integer dots where it has AVX-512 VNNI (16 or 8)"),
    llvm::cl::value_desc("BITS"), llvm::cl::init(16));

static llvm::cl::opt<bool> attendPrograms(
    "kvq-attend-programs",
    llvm::cl::desc("With --kvq-compile: build the attend kernels of "
                   "full-precision layers as programs (=false: emitted)"),
    llvm::cl::init(true));

static llvm::cl::opt<bool> quantizedAttendPrograms(
    "kvq-quantized-attend-programs",
    llvm::cl::desc("With --kvq-compile: build the attend kernels of quantized "
                   "layers in channel order as programs too (default: "
                   "emitted)"),
    llvm::cl::init(false));

static llvm::cl::opt<bool> helpKvq(
    "help-kvq",
    llvm::cl::desc("List only kvq's passes, pipelines and options, and exit"),
    llvm::cl::init(false));

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

/// kvq-compile-pipeline, then the artifact writer on its result. The
/// verifier runs between the passes only under an explicit --verify-each
/// (docs/Rationale.md, "Verification"); the writer verifies what it writes.
static void setUpCompile(mlir::PassManager &pm,
                         const mlir::MlirOptMainConfig &base) {
  llvm::cl::Option *verifyEach =
      llvm::cl::getRegisteredOptions().lookup("verify-each");
  bool verifyEachGiven = verifyEach && verifyEach->getNumOccurrences() > 0;
  pm.enableVerifier(verifyEachGiven && base.shouldVerifyPasses());
  kvq::KVQCompilePipelineOptions options;
  options.hostCpu = hostCpu;
  options.dotFactorBits = dotFactorBits;
  options.attendPrograms = attendPrograms;
  options.quantizedAttendPrograms = quantizedAttendPrograms;
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
  setUpCompile(pm, base);
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

/// --help-kvq: kvq's own entries of the command line, which --help lists
/// among several hundred of MLIR's and LLVM's. Every registered pass and
/// pipeline is a literal of MLIR's pass list option, so the option map holds
/// their names; kvq's all start with `kvq-`.
static void printKvqHelp() {
  std::vector<llvm::StringRef> names;
  auto &options = llvm::cl::getRegisteredOptions();
  for (auto &[name, option] : options)
    if (name.starts_with("kvq-"))
      names.push_back(name);
  llvm::sort(names);
  llvm::raw_ostream &os = llvm::outs();
  constexpr size_t indent = 2, descIndent = 40;
  os << "kvq-opt: kvq's passes, pipelines and options (--help lists MLIR's "
        "and LLVM's too)\n\nPasses:\n";
  for (llvm::StringRef name : names)
    if (const mlir::PassInfo *pass = mlir::PassInfo::lookup(name))
      pass->printHelpStr(indent, descIndent);
  os << "\nPass pipelines:\n";
  for (llvm::StringRef name : names)
    if (const mlir::PassPipelineInfo *pipeline =
            mlir::PassPipelineInfo::lookup(name))
      pipeline->printHelpStr(indent, descIndent);
  os << "\nOptions:\n";
  for (llvm::StringRef name : names) {
    if (mlir::PassInfo::lookup(name) || mlir::PassPipelineInfo::lookup(name))
      continue;
    llvm::cl::Option *option = options.lookup(name);
    std::string flag = ("--" + name).str();
    if (!option->ValueStr.empty())
      flag += ("=<" + option->ValueStr + ">").str();
    os.indent(indent) << flag;
    os.indent(std::max<int>(1, int(descIndent) - 2 - int(indent + flag.size())))
        << "- " << option->HelpStr << "\n";
  }
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
  mlir::memref::registerExpandStridedMetadataPass();
  mlir::registerFinalizeMemRefToLLVMConversionPass();
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
      argc, argv,
      "kvq optimizer driver (kvq's own passes, pipelines and options alone: "
      "--help-kvq)\n",
      registry);
  if (helpKvq) {
    printKvqHelp();
    return 0;
  }
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
