//===- ExpandHadamard.cpp - kvq.hadamard to each target's form -----------===//
//
// A block of one thread with vector registers (the host) rotates a row at a
// time in vectors of its lanes, a row after another; a block of threads
// (the GPU) shares each stage's butterflies, a parallel loop a stage that
// kvq-distribute-parallel spreads over the threads and ends with a barrier.
// Both are Rotation.cpp's, the arithmetic of the reference.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Rotation.h"
#include "kvq/Codegen/Targets.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDHADAMARD
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// The rotation of `info`'s target, reading and writing the op's buffer.
struct ExpandHadamard : OpRewritePattern<HadamardOp> {
  ExpandHadamard(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern(ctx), info(info) {}

  LogicalResult matchAndRewrite(HadamardOp op,
                                PatternRewriter &rewriter) const override {
    ProgramBuilder pb(rewriter, op.getLoc());
    Value rows = op.getRows();
    unsigned dim = op.getDim();
    auto loadRotated = [&](Value at) { return pb.loadElement(rows, at); };
    auto load = [&](Value row, Value c, unsigned lanes) {
      Value at = pb.add(pb.mul(row, pb.i32(dim)), c);
      return lanes == 1 ? loadRotated(at) : pb.loadVectorAsF32(rows, at, lanes);
    };
    auto store = [&](Value x, Value at) {
      if (isa<VectorType>(x.getType()))
        pb.storeVector(x, rows, at);
      else
        pb.storeElement(x, rows, at);
    };
    // A thread runs the whole rotation in turn; threads share a stage.
    auto parallelFor = [&](unsigned count, function_ref<void(Value)> body) {
      if (info.blockThreads == 1)
        return pb.forEach(pb.i32(0), pb.i32(count), body);
      pb.parallelFor(count, [&](Value i) { body(pb.indexToI32(i)); });
    };
    std::optional<uint64_t> seed = op.getSeed();
    auto direction = op.getInverse() ? RotationDirection::Inverse
                                     : RotationDirection::Forward;
    rotateRows(
        pb, seed ? std::optional<unsigned>(unsigned(*seed)) : std::nullopt, dim,
        MemRefType(op.getRows().getType()).getNumElements() / dim, direction,
        getRotationLanes(info, dim), {load, loadRotated, store, parallelFor});
    rewriter.eraseOp(op);
    return success();
  }

  TargetInfo info;
};

LogicalResult expandHadamards(Operation *root, const TargetInfo &info) {
  RewritePatternSet patterns(root->getContext());
  patterns.add<ExpandHadamard>(root->getContext(), info);
  walkAndApplyPatterns(root, std::move(patterns));
  return success();
}

struct KVQExpandHadamardPass
    : kvq::impl::KVQExpandHadamardBase<KVQExpandHadamardPass> {
  void runOnOperation() override {
    // The kernel modules by their targets, then what is left anywhere.
    if (failed(forEachKernelModule(getOperation(), expandHadamards)) ||
        failed(expandHadamards(getOperation(), TargetInfo())))
      signalPassFailure();
  }
};

} // namespace
