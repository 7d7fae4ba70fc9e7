//===- ExpandHadamard.cpp - kvq.hadamard to each target's form -----------===//
//
// A block of one thread with vector registers (the host) rotates a row at a
// time in vectors of its lanes, a row after another; a block of threads
// (the GPU) shares each stage's butterflies, a parallel loop a stage that
// kvq-distribute-parallel spreads over the threads and ends with a barrier.
// Both are Rotation.cpp's, the arithmetic of the reference. An input region
// is read where the rotation first reads each element: by the GPU's first
// stage, element by element; on the host a row at a time into a row of its
// own, then as vectors.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Rotation.h"
#include "kvq/Codegen/Targets.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDHADAMARD
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// Clones the ops of `input` (a kvq.hadamard's input block) at `b` with
/// its (row, channel) arguments mapped in `mapping`; `skip` the ops already
/// cloned. Returns the yielded element.
Value cloneInput(OpBuilder &b, Block &input, IRMapping &mapping,
                 const llvm::DenseSet<Operation *> &skip = {}) {
  for (Operation &op : input.without_terminator())
    if (!skip.contains(&op))
      b.clone(op, mapping);
  return mapping.lookup(cast<YieldOp>(input.getTerminator()).getValue());
}

/// The ops of `input` to compute once a row: free of memory effects and
/// not depending on the channel argument.
llvm::DenseSet<Operation *> getRowOps(Block &input) {
  llvm::DenseSet<Value> channel{input.getArgument(1)};
  llvm::DenseSet<Operation *> rowOps;
  for (Operation &op : input.without_terminator()) {
    bool perChannel = false;
    op.walk([&](Operation *nested) {
      perChannel |= llvm::any_of(nested->getOperands(), [&](Value operand) {
        return channel.contains(operand);
      });
    });
    if (perChannel || !isMemoryEffectFree(&op))
      channel.insert(op.result_begin(), op.result_end());
    else
      rowOps.insert(&op);
  }
  return rowOps;
}

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
    Block *input = op.getInputBlock();
    unsigned rotationLanes = getRotationLanes(info, dim);
    // The vector form reads an input row from a row of its own, which LLVM
    // keeps in registers, and stores the rows once, rotated.
    Value inputRow =
        input && rotationLanes > 1 ? allocateRow(rewriter, op, dim) : Value();
    // The row the vector form last wrote from the input.
    Value lastRow;
    auto load = [&](Value row, Value c, unsigned lanes) {
      Value at = pb.add(pb.mul(row, pb.i32(dim)), c);
      if (!input)
        return lanes == 1 ? loadRotated(at)
                          : pb.loadVectorAsF32(rows, at, lanes);
      if (lanes == 1)
        return loadInput(pb, *input, row, c);
      if (row != lastRow)
        writeRow(pb, *input, inputRow, row);
      lastRow = row;
      return pb.loadVectorAsF32(inputRow, c, lanes);
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
    rotateRows(pb,
               seed ? std::optional<unsigned>(unsigned(*seed)) : std::nullopt,
               dim, op.getRows().getType().getNumElements() / dim, direction,
               rotationLanes, {load, loadRotated, store, parallelFor});
    rewriter.eraseOp(op);
    return success();
  }

  /// The input's element (row, c) (i32), for a form that reads each once.
  static Value loadInput(ProgramBuilder &pb, Block &input, Value row, Value c) {
    IRMapping mapping;
    mapping.map(input.getArgument(0), pb.toIndex(row));
    mapping.map(input.getArgument(1), pb.toIndex(c));
    return cloneInput(pb.builder(), input, mapping);
  }

  /// A row of `dim` f32 at the start of the function holding `op`: the
  /// vector form's copy of an input row, one buffer for every row.
  static Value allocateRow(PatternRewriter &rewriter, HadamardOp op,
                           unsigned dim) {
    OpBuilder::InsertionGuard guard(rewriter);
    Operation *scope =
        op->getParentWithTrait<OpTrait::AutomaticAllocationScope>();
    rewriter.setInsertionPointToStart(&scope->getRegion(0).front());
    auto type = MemRefType::get({dim}, rewriter.getF32Type());
    return memref::AllocaOp::create(rewriter, op.getLoc(), type);
  }

  /// Writes the input's row `row` (i32) into `dst` (a row of its own), a
  /// parallel loop over its channels after what depends on the row alone:
  /// the form that reads a row as vectors (kvq-vectorize-parallel makes the
  /// loop the lanes', and LLVM forwards its stores to the row's loads).
  static void writeRow(ProgramBuilder &pb, Block &input, Value dst, Value row) {
    IRMapping mapping;
    mapping.map(input.getArgument(0), pb.toIndex(row));
    llvm::DenseSet<Operation *> rowOps = getRowOps(input);
    for (Operation &op : input.without_terminator())
      if (rowOps.contains(&op))
        pb.builder().clone(op, mapping);
    unsigned dim = cast<MemRefType>(dst.getType()).getNumElements();
    pb.parallelFor(dim, [&](Value c) {
      IRMapping element = mapping;
      element.map(input.getArgument(1), c);
      pb.storeElement(cloneInput(pb.builder(), input, element, rowOps), dst, c);
    });
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
