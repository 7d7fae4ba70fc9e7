//===- CPUTarget.cpp - kernels as host functions --------------------------===//
//
// The CPU runs one block of a grid per call; the block's threads become a
// loop (which LLVM vectorizes where it can), block-local memory is a stack
// allocation and reductions are sequential.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/IntegerFactors.h"
#include "kvq/Codegen/Layout.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kvq;

namespace {

class CPUTarget : public KernelTarget {
public:
  CPUTarget(ModuleOp module, TargetAttr target)
      : KernelTarget(getCPUTargetInfo(target)), module(module) {}

  KernelEntry createKernel(OpBuilder &b, Location loc, StringRef name,
                           ArrayRef<ArgKind> args) override {
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    Type i32 = b.getI32Type();
    b.setInsertionPointToEnd(module.getBody());
    auto func = func::FuncOp::create(
        b, loc, name, b.getFunctionType({ptr, i32, i32, i32}, {}));
    currentKernel = func;
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    KernelEntry kernel;
    // `args` holds pointers to the argument values, as cuLaunchKernel's.
    for (auto [index, kind] : llvm::enumerate(args)) {
      Value offset = arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                                  8 * int64_t(index));
      Value slot = LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(),
                                       entry->getArgument(0), offset);
      Value valuePtr = LLVM::LoadOp::create(b, loc, ptr, slot, 8);
      bool isPtr = kind != ArgKind::I32;
      kernel.args.push_back(LLVM::LoadOp::create(b, loc, isPtr ? ptr : i32,
                                                 valuePtr, isPtr ? 8 : 4));
    }
    for (int d = 0; d < 3; ++d)
      kernel.blockId[d] = entry->getArgument(1 + d);
    return kernel;
  }

  void finishKernel(OpBuilder &b, Location loc) override {
    func::ReturnOp::create(b, loc);
  }

  Type getGlobalPtrType(MLIRContext *ctx) const override {
    return LLVM::LLVMPointerType::get(ctx);
  }

  void parallelFor(KernelBuilder &kb, Value count,
                   llvm::function_ref<void(Value)> body) override {
    kb.forEach(kb.i32(0), count, body);
  }
  void parallelForNoWait(KernelBuilder &kb, Value count,
                         llvm::function_ref<void(Value)> body) override {
    parallelFor(kb, count, body);
  }

  bool prefetchesPages() const override { return true; }
  void prefetchLine(KernelBuilder &kb, Value address) override {
    LLVM::Prefetch::create(kb.builder(), kb.getLoc(), address, /*rw=*/0,
                           /*hint=*/2, /*cache=*/1);
  }

  /// The block's one thread adds itself with an acquire-release
  /// read-modify-write: it releases its writes, and the last block's
  /// acquires those of every block before it (one release sequence).
  Value arriveLast(KernelBuilder &kb, Value counter, Value count) override {
    Value arrived = kb.atomicAddU32(counter, kb.i64(0), kb.i32(1),
                                    LLVM::AtomicOrdering::acq_rel);
    Value last = kb.eq(arrived, kb.sub(count, kb.i32(1)));
    kb.ifThen(last, [&] {
      LLVM::StoreOp::create(kb.builder(), kb.getLoc(), kb.i32(0), counter, 4,
                            /*isVolatile=*/false, /*isNonTemporal=*/false,
                            /*isInvariantGroup=*/false,
                            LLVM::AtomicOrdering::monotonic);
    });
    return last;
  }

  Value allocShared(KernelBuilder &kb, uint64_t bytes) override {
    // In the entry block, so that an allocation made inside a loop does not
    // grow the stack every iteration.
    // (Loop bodies are built before their op exists: no walking up to the
    // function from the insertion point.)
    OpBuilder &b = kb.builder();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&currentKernel.getBody().front());
    return LLVM::AllocaOp::create(
        b, kb.getLoc(), LLVM::LLVMPointerType::get(b.getContext()),
        b.getI8Type(), kb.i64(bytes), /*alignment=*/16);
  }

  Value reduce(KernelBuilder &kb, ReduceKind kind, Value ptr,
               Value count) override {
    float identity = kind == ReduceKind::Sum
                         ? 0.0f
                         : -std::numeric_limits<float>::infinity();
    return kb.forLoop(kb.i32(0), count, kb.i32(1), {kb.f32(identity)},
                      [&](Value i, ValueRange acc) -> SmallVector<Value> {
                        Value x = kb.loadF32(ptr, i);
                        return {kind == ReduceKind::Sum ? kb.fadd(acc[0], x)
                                                        : kb.fmax(acc[0], x)};
                      })[0];
  }

  void accumulate(KernelBuilder &kb, Value lanes, unsigned maxLanes,
                  unsigned numSums, unsigned unroll,
                  ArrayRef<std::pair<IndexRange, AccumulateStep>> steps,
                  function_ref<void(Value, ValueRange)> finish) override {
    // sums[s * lanes + lane] in block-local memory, lanes innermost.
    Value sums = allocShared(kb, uint64_t(numSums) * maxLanes * 4);
    auto at = [&](unsigned s, Value lane) {
      return kb.add(kb.i32(s * maxLanes), lane);
    };
    kb.forEach(kb.i32(0), lanes, [&](Value lane) {
      for (unsigned s = 0; s < numSums; ++s)
        kb.storeF32(kb.f32(0), sums, at(s, lane));
    });
    // Indices in groups of `unroll` per pass over the lanes, so that each
    // sum is loaded and stored once per group; then the remainder.
    auto pass = [&](Value first, unsigned count, AccumulateStep step) {
      kb.forEach(kb.i32(0), lanes, [&](Value lane) {
        SmallVector<Value> current;
        for (unsigned s = 0; s < numSums; ++s)
          current.push_back(kb.loadF32(sums, at(s, lane)));
        for (unsigned u = 0; u < count; ++u)
          current = step(kb.add(first, kb.i32(u)), lane, current);
        for (unsigned s = 0; s < numSums; ++s)
          kb.storeF32(current[s], sums, at(s, lane));
      });
    };
    for (auto [range, step] : steps) {
      Value length = kb.maxS(kb.sub(range.end, range.begin), kb.i32(0));
      Value unrolledEnd = kb.add(
          range.begin, kb.mul(kb.divU(length, kb.i32(unroll)), kb.i32(unroll)));
      kb.forLoop(range.begin, unrolledEnd, kb.i32(unroll), {},
                 [&](Value first, ValueRange) {
                   pass(first, unroll, step);
                   return SmallVector<Value>();
                 });
      kb.forEach(unrolledEnd, kb.maxS(range.end, unrolledEnd),
                 [&](Value index) { pass(index, 1, step); });
    }
    kb.forEach(kb.i32(0), lanes, [&](Value lane) {
      SmallVector<Value> current;
      for (unsigned s = 0; s < numSums; ++s)
        current.push_back(kb.loadF32(sums, at(s, lane)));
      finish(lane, current);
    });
  }

  Value getConstantTable(KernelBuilder &kb, StringRef name,
                         ArrayRef<int32_t> values) override {
    return kb.getGlobalTable(
        module, (currentKernel.getSymName() + "_" + name).str(), values, 0);
  }

  /// One `vpdpwssd` (the target's cpu_dot: 16 lanes).
  Value dotI16Pairs(KernelBuilder &kb, Value acc, Value x, Value y) override {
    assert(getInfo().dot == kI16PairDots.getUnit(kb.builder().getContext()) &&
           "the target has no vpdpwssd");
    return dotI16PairsAVX512(kb, acc, x, y);
  }
  unsigned getSplitTokens(const CacheLayout &layout) const override {
    return layout.hostSplitTokens;
  }
  SmallVector<Value> reduceAcrossWorkers(KernelBuilder &, ReduceKind,
                                         ValueRange values,
                                         unsigned workers) override {
    assert(workers == 1 && "a CPU block has one worker");
    return SmallVector<Value>(values.begin(), values.end());
  }

  /// 2^x = 2^i * 2^f with i = round(x), |f| <= 1/2, 2^f by its degree-6
  /// Taylor polynomial (relative error < 2e-7), all in vectorizable
  /// arithmetic: a libm call per softmax weight would dominate decode time.
  Value exp2(KernelBuilder &kb, Value x) override {
    // Of an f32 or a vector of them (a kernel program's vectorized loop).
    Value clamped =
        kb.fmax(kb.fmin(x, kb.f32Like(x, 126.0)), kb.f32Like(x, -126.0));
    Value whole = kb.roundEven(clamped);
    Value f = kb.fsub(clamped, whole);
    // (ln 2)^k / k!
    SmallVector<double> coefficients;
    double coefficient = 1.0;
    for (int k = 0; k <= 6; ++k) {
      coefficients.push_back(coefficient);
      coefficient *= M_LN2 / (k + 1);
    }
    Value poly = kb.f32Like(x, coefficients.back());
    for (int k = 5; k >= 0; --k)
      poly = kb.fadd(kb.fmul(poly, f), kb.f32Like(x, coefficients[k]));
    Value exponent =
        kb.shl(kb.add(kb.fptosi(whole), kb.i32Like(x, 127)), kb.i32Like(x, 23));
    return kb.fmul(poly, kb.bitcast(kb.builder().getF32Type(), exponent));
  }

private:
  ModuleOp module;
  /// The kernel being emitted.
  func::FuncOp currentKernel;
};

} // namespace

TargetInfo kvq::getCPUTargetInfo(TargetAttr target) {
  TargetInfo info;
  info.vectorLanes = target.getVectorLanes();
  // AVX-512 has 32 vector registers, AVX and SSE 16.
  info.vectorRegisters = info.vectorLanes >= 16 ? 32 : 16;
  info.lanePermutes = true;
  info.dot = target.getCpuDot();
  return info;
}

std::unique_ptr<KernelTarget> kvq::createCPUTarget(ModuleOp module,
                                                   TargetAttr target) {
  return std::make_unique<CPUTarget>(module, target);
}
