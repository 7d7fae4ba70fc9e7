//===- Compiler.cpp - the compiler as the Python extension calls it -------===//

#include "Compiler.h"

#include "kvq/Analysis/BitAccounting.h"
#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/Pipelines.h"
#include "kvq/Dialect/KVQ/InputLimits.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"
#include "kvq/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace kvq;
using namespace kvq::python;

namespace {

/// A context with every dialect a spec and its compilation need, collecting
/// its diagnostics as text.
class SpecSession {
public:
  SpecSession() : context(makeRegistry()), handler(sources, &context, os) {}

  /// Parses and verifies `text`; null (with diagnostics) on failure.
  OwningOpRef<ModuleOp> parse(const std::string &text,
                              const std::string &name) {
    if (auto violation = checkSpecInputLimits(text)) {
      // Located as kvq-opt locates it, without quoting the line.
      llvm::StringRef before =
          llvm::StringRef(text).take_front(violation->offset);
      size_t lineStart = before.rfind('\n');
      size_t column = lineStart == llvm::StringRef::npos
                          ? before.size() + 1
                          : before.size() - lineStart;
      os << name << ":" << before.count('\n') + 1 << ":" << column
         << ": error: " << violation->message << "\n";
      return nullptr;
    }
    // The handler quotes source lines from `sources`, so the spec goes there.
    sources.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                               llvm::SMLoc());
    ParserConfig config(&context);
    return parseSourceFile<ModuleOp>(sources, config);
  }

  /// A failed result carrying the diagnostics reported so far.
  template <typename T> SpecResult<T> fail(const char *fallback) {
    SpecResult<T> result;
    result.diagnostics = messages.empty() ? fallback : messages;
    return result;
  }

  MLIRContext &getContext() { return context; }

private:
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registry.insert<KVQDialect>();
    registerCodegenDependencies(registry);
    return registry;
  }

  MLIRContext context;
  llvm::SourceMgr sources;
  std::string messages;
  llvm::raw_string_ostream os{messages};
  SourceMgrDiagnosticHandler handler;
};

template <typename T> SpecResult<T> succeed(T value) {
  SpecResult<T> result;
  result.ok = true;
  result.value = std::move(value);
  return result;
}

} // namespace

SpecResult<bool> kvq::python::compile(const std::string &spec,
                                      const std::string &dir,
                                      const CompileOptions &compile,
                                      const std::string &name) {
  SpecSession session;
  OwningOpRef<ModuleOp> module = session.parse(spec, name);
  if (!module)
    return session.fail<bool>("the spec does not parse");
  KVQCompilePipelineOptions options;
  options.hostCpu = compile.hostCpu;
  options.dotFactorBits = compile.dotFactorBits;
  options.quantizedAttendPrograms = compile.quantizedAttendPrograms;
  if (failed(compileArtifact(*module, dir, options)))
    return session.fail<bool>("compilation failed");
  return succeed(true);
}

SpecResult<std::string> kvq::python::setModel(const std::string &spec,
                                              const ModelOptions &model,
                                              const std::string &name) {
  SpecSession session;
  OwningOpRef<ModuleOp> module = session.parse(spec, name);
  if (!module)
    return session.fail<std::string>("the spec does not parse");
  KVQSetModelOptions options;
  options.layers = model.layers;
  options.heads = model.heads;
  options.kvHeads = model.kvHeads;
  options.headDim = model.headDim;
  options.dtype = model.dtype;
  options.clampGroups = model.clampGroups;
  PassManager pm(&session.getContext());
  pm.addNestedPass<CacheOp>(createKVQSetModel(options));
  if (failed(pm.run(*module)))
    return session.fail<std::string>("kvq-set-model failed");
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return succeed(std::move(text));
}

SpecResult<std::vector<CacheBits>>
kvq::python::reportBits(const std::string &spec, uint64_t tokens,
                        const std::string &name) {
  SpecSession session;
  OwningOpRef<ModuleOp> module = session.parse(spec, name);
  if (!module)
    return session.fail<std::vector<CacheBits>>("the spec does not parse");
  std::vector<CacheBits> caches;
  for (CacheOp cache : module->getOps<CacheOp>()) {
    if (failed(cache.verifyTablesPresent()))
      return session.fail<std::vector<CacheBits>>("tables are missing");
    FailureOr<SequenceBytes> bytes = computeSequenceBytesOrError(cache, tokens);
    if (failed(bytes))
      return session.fail<std::vector<CacheBits>>("too many tokens");
    EquivalentBits bits = computeEquivalentBits(cache);
    caches.push_back({cache.getSymName().str(), bits.codeBits, bits.storageBits,
                      bytes->getTotal(), bytes->codes, bytes->params,
                      bytes->fullPrecision, bytes->pools, bytes->metadata});
  }
  return succeed(std::move(caches));
}
