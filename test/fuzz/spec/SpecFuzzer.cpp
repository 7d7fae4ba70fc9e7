//===- SpecFuzzer.cpp - Fuzz the spec parser and verifier -----------------===//
//
// Part of kvq, the fuzz harnesses.
//
//===----------------------------------------------------------------------===//
//
// The input is a spec's text. As kvq-opt does, the input limits are checked
// first (kvq/Dialect/KVQ/InputLimits.h), then MLIR parses the text with the
// kvq dialect loaded and verifies the result. A spec that verifies then
// goes through the compiler's first stage, kvq-build-kernels (target,
// schedule, layout, kernel plan, lowering of the kernels to host functions
// and GPU kernels, dequantization and unpacking, NVVM target), with the
// verifier after each pass; LLVM's code generation, which only sees what
// these produce, is left out for speed. Diagnostics are expected; crashes,
// sanitizer findings, hangs and memory blow-ups are findings.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Pipelines.h"
#include "kvq/Dialect/KVQ/InputLimits.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace {

/// A context with the kvq dialect; renewed now and then, since it keeps
/// every attribute and identifier it has seen.
mlir::MLIRContext &context() {
  static std::unique_ptr<mlir::MLIRContext> Context;
  static unsigned Uses = 0;
  if (!Context || ++Uses % 512 == 0) {
    mlir::DialectRegistry Registry;
    Registry.insert<kvq::KVQDialect>();
    kvq::registerCodegenDependencies(Registry);
    Context = std::make_unique<mlir::MLIRContext>(
        Registry, mlir::MLIRContext::Threading::DISABLED);
    Context->loadDialect<kvq::KVQDialect>();
    Context->allowUnregisteredDialects(false);
  }
  return *Context;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  // MLIR's lexer relies on the NUL that a MemoryBuffer (kvq-opt's input)
  // ends with; fuzzer data has none.
  std::string Copy(reinterpret_cast<const char *>(Data), Size);
  llvm::StringRef Text(Copy);
  if (kvq::checkSpecInputLimits(Text))
    return 0;
  // MLIR 22's parser of the file-metadata section (`{-# dialect_resources
  // ... #-}`) reads past the end of the text on some malformed blobs
  // (test/fuzz/spec/known-crashes, docs/Reliability.md): an upstream bug
  // this harness would otherwise find again within seconds.
  if (Text.contains("{-#"))
    return 0;
  mlir::MLIRContext &Context = context();
  mlir::ScopedDiagnosticHandler Quiet(
      &Context, [](mlir::Diagnostic &) { return mlir::success(); });
  // Parsing verifies the module.
  mlir::OwningOpRef<mlir::ModuleOp> Module =
      mlir::parseSourceString<mlir::ModuleOp>(Text, &Context);
  if (!Module)
    return 0;
  // A fixed host CPU: the kernels do not depend on the fuzzing machine.
  kvq::KVQCompilePipelineOptions Options;
  Options.hostCpu = "x86-64-v3";
  mlir::PassManager PM(&Context);
  kvq::buildKVQKernelsPipeline(PM, Options);
  (void)PM.run(*Module);
  return 0;
}
