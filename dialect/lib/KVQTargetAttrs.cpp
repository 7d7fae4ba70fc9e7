//===- KVQTargetAttrs.cpp - targets, units and forms ----------------------===//

#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kvq;

#include "kvq/Dialect/KVQ/KVQInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

static LogicalResult verifyUnit(function_ref<InFlightDiagnostic()> emitError,
                                unsigned m, unsigned n, unsigned k,
                                Type operands, Type accumulator) {
  if (m == 0 || n == 0 || k == 0)
    return emitError() << "m, n and k must be positive";
  if (!operands.isIntOrFloat() || !accumulator.isIntOrFloat())
    return emitError() << "operands and accumulator must be integer or "
                          "floating-point types";
  if (accumulator.getIntOrFloatBitWidth() < operands.getIntOrFloatBitWidth())
    return emitError() << "the accumulator must be at least as wide as the "
                          "operands";
  return success();
}

LogicalResult
MatrixUnitAttr::verify(function_ref<InFlightDiagnostic()> emitError, unsigned m,
                       unsigned n, unsigned k, Type operands,
                       Type accumulator) {
  return verifyUnit(emitError, m, n, k, operands, accumulator);
}

LogicalResult DotUnitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  unsigned m, unsigned n, unsigned k,
                                  Type operands, Type accumulator) {
  if (failed(verifyUnit(emitError, m, n, k, operands, accumulator)))
    return failure();
  // One register's lanes, each a sum of its own products.
  if (n != 1)
    return emitError() << "a dot unit's n must be 1";
  return success();
}

//===----------------------------------------------------------------------===//
// TargetAttr
//===----------------------------------------------------------------------===//

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef hostCpu, ArrayAttr chips,
                                 unsigned warpSize, unsigned blockThreads,
                                 unsigned splitTokens, unsigned hostSplitTokens,
                                 unsigned vectorLanes, DotUnitAttr cpuDot,
                                 MatrixUnitAttr gpuMatrix) {
  if (hostCpu.empty())
    return emitError() << "host_cpu must name a CPU (or 'native')";
  if (!chips || chips.empty())
    return emitError() << "chips must name at least one GPU";
  for (Attribute chip : chips) {
    auto name = dyn_cast<StringAttr>(chip);
    if (!name || !name.getValue().starts_with("sm_"))
      return emitError() << "chips must be strings naming sm_XX targets";
  }
  // The GPU reductions shuffle within a warp and combine warps through
  // shared memory: powers of two, whole warps, at most CUDA's 1024 threads.
  if (!llvm::isPowerOf2_32(warpSize) || warpSize > 64)
    return emitError() << "warp_size must be a power of two <= 64";
  if (!llvm::isPowerOf2_32(blockThreads) || blockThreads < warpSize ||
      blockThreads > 1024)
    return emitError() << "block_threads must be a power of two in "
                          "[warp_size, 1024]";
  if (splitTokens == 0 || splitTokens > kMaxWindowTokens ||
      hostSplitTokens == 0 || hostSplitTokens > kMaxWindowTokens)
    return emitError() << "split_tokens and host_split_tokens must be in [1, "
                       << kMaxWindowTokens << "]";
  if (!llvm::isPowerOf2_32(vectorLanes) || vectorLanes > 64)
    return emitError() << "vector_lanes must be a power of two <= 64";
  // A dot unit computes on one vector register: its lanes are the i32 (or
  // f32) lanes the CPU's vector forms use.
  if (cpuDot && cpuDot.getM() != vectorLanes)
    return emitError() << "cpu_dot must have m = vector_lanes (" << vectorLanes
                       << ")";
  // An mma.sync is executed by a whole warp of 32 threads.
  if (gpuMatrix && warpSize != 32)
    return emitError() << "gpu_matrix needs warp_size = 32";
  return success();
}

/// The compute capability of `chip` (sm_XX, sm_XXa), 0 if unreadable.
static unsigned getComputeCapability(StringRef chip) {
  unsigned capability = 0;
  chip.consume_front("sm_");
  chip = chip.take_while([](char c) { return llvm::isDigit(c); });
  return chip.getAsInteger(10, capability) ? 0 : capability;
}

MatrixUnitAttr TargetAttr::getCommonMatrixUnit(MLIRContext *ctx,
                                               ArrayAttr chips,
                                               unsigned warpSize) {
  unsigned oldest = ~0u;
  for (Attribute chip : chips)
    oldest = std::min(oldest,
                      getComputeCapability(cast<StringAttr>(chip).getValue()));
  // mma.sync.aligned.m16n8k16 with f16 operands: PTX ISA 7.0, sm_80.
  if (oldest < 80 || warpSize != 32)
    return {};
  return MatrixUnitAttr::get(ctx, 16, 8, 16, Float16Type::get(ctx),
                             Float32Type::get(ctx));
}

TargetAttr TargetAttr::getDefault(MLIRContext *ctx, StringRef hostCpu,
                                  ArrayRef<std::string> chips,
                                  unsigned vectorLanes, DotUnitAttr cpuDot) {
  SmallVector<Attribute> names;
  for (const std::string &chip : chips)
    names.push_back(StringAttr::get(ctx, chip));
  if (names.empty())
    for (const char *chip : kDefaultChips)
      names.push_back(StringAttr::get(ctx, chip));
  auto chipsAttr = ArrayAttr::get(ctx, names);
  constexpr unsigned warpSize = 32;
  return TargetAttr::get(ctx, hostCpu, chipsAttr, warpSize,
                         /*blockThreads=*/128, /*splitTokens=*/512,
                         kDefaultHostSplitTokens, vectorLanes, cpuDot,
                         getCommonMatrixUnit(ctx, chipsAttr, warpSize));
}

SmallVector<std::string> TargetAttr::getChipNames() const {
  SmallVector<std::string> names;
  for (Attribute chip : getChips())
    names.push_back(cast<StringAttr>(chip).str());
  return names;
}

std::string TargetAttr::getPtxChip() const {
  StringRef oldest;
  for (Attribute chip : getChips()) {
    StringRef name = cast<StringAttr>(chip).getValue();
    if (oldest.empty() ||
        getComputeCapability(name) < getComputeCapability(oldest))
      oldest = name;
  }
  return oldest.str();
}
