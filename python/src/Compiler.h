//===- Compiler.h - the compiler as the Python extension calls it -*- C++
//-*-===//
//
// Plain C++ over kvq's compiler: no MLIR type crosses it, so the extension
// (built with RTTI and exceptions, as nanobind needs) never instantiates an
// MLIR class that LLVM's libraries were built without RTTI for.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PYTHON_COMPILER_H
#define KVQ_PYTHON_COMPILER_H

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::python {

/// A call's value, or the diagnostics (MLIR's `file:line:col: error: ...`)
/// that stopped it.
template <typename T> struct SpecResult {
  bool ok = false;
  T value{};
  std::string diagnostics;
};

/// kvq-set-model's options; 0 and "" keep the spec's value.
struct ModelOptions {
  unsigned layers = 0, heads = 0, kvHeads = 0, headDim = 0;
  std::string dtype;
  bool clampGroups = false;
};

/// One cache's bit accounting (kvq-opt --kvq-report-bits).
struct CacheBits {
  std::string name;
  double codeBits = 0, storageBits = 0;
  uint64_t bytes = 0, codes = 0, params = 0, fullPrecision = 0, pools = 0,
           metadata = 0;
};

/// What kvq.compile passes to kvq-compile-pipeline.
struct CompileOptions {
  std::string hostCpu = "native";
  unsigned dotFactorBits = 16;
  bool quantizedAttendPrograms = false;
};

/// Runs kvq-compile-pipeline and the artifact writer on `spec` (named
/// `name` in diagnostics), writing into `dir`.
SpecResult<bool> compile(const std::string &spec, const std::string &dir,
                         const CompileOptions &options,
                         const std::string &name);

/// `spec` after kvq-set-model, printed.
SpecResult<std::string> setModel(const std::string &spec,
                                 const ModelOptions &model,
                                 const std::string &name);

/// The accounting of every cache of `spec` for sequences of `tokens`.
SpecResult<std::vector<CacheBits>>
reportBits(const std::string &spec, uint64_t tokens, const std::string &name);

} // namespace kvq::python

#endif // KVQ_PYTHON_COMPILER_H
