//===- VectorizeParallel.cpp - channel loops as vectors on the CPU --------===//
//
// The CPU's form of a kernel program's `scf.parallel`: a block runs on one
// thread, so the iterations its threads would share become one loop whose
// step is a vector of the target's lanes. A loop over [0, N) whose
// induction variable only indexes the unit-stride dimension of memrefs
// (a row of channels) loads and stores vectors there; arithmetic that
// depends on it runs on vectors, lane by lane the same operations, and
// loops inside it carry vectors; its reductions are vectors of the lanes'
// shares, combined after it. A reduction inside such a loop that is no
// vectors itself runs in order, so that the loop around it is vectors
// carrying its sums; any other loop is left to the sequential lowering of
// scf.parallel.
//
//===----------------------------------------------------------------------===//

#include "ParallelForms.h"
#include "Vectorizer.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"


namespace kvq {
#define GEN_PASS_DEF_KVQVECTORIZEPARALLEL
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

bool kvq::usesAny(Operation *op, const llvm::DenseSet<Value> &values) {
  WalkResult uses = op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (values.contains(operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return uses.wasInterrupted();
}

SmallVector<Operation *> kvq::getSliceInBlock(Block *block, ValueRange roots) {
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  options.filter = [&](Operation *op) { return op->getBlock() == block; };
  llvm::SetVector<Operation *> slice;
  for (Value root : roots)
    if (Operation *op = root.getDefiningOp(); op && op->getBlock() == block) {
      LogicalResult found = getBackwardSlice(op, &slice, options);
      assert(succeeded(found) && "block arguments are not followed");
      (void)found;
    }
  SmallVector<Operation *> ordered = slice.takeVector();
  llvm::sort(ordered,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  return ordered;
}

bool kvq::isLaneAccess(Operation *op, Value iv,
                       const llvm::DenseSet<Value> &varying) {
  auto [memref, indices] = getMemRefAccess(op);
  if (!memref || indices.empty() || indices.back() != iv ||
      varying.contains(memref) ||
      llvm::any_of(indices.drop_back(),
                   [&](Value index) { return varying.contains(index); }))
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(cast<MemRefType>(memref.getType())
                       .getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

bool kvq::isElementwiseOp(Operation *op) {
  if (op->hasTrait<OpTrait::Elementwise>())
    return true;
  // LLVM's generic intrinsics kvq's arithmetic builder calls (fabs, sqrt,
  // roundeven, ...) take vectors lane by lane.
  return isa<LLVM::CallIntrinsicOp>(op) && op->getNumResults() == 1;
}

std::optional<int64_t> kvq::getScaledIndex(Value index, Value iv) {
  auto mul = index.getDefiningOp<arith::MulIOp>();
  if (!mul)
    return std::nullopt;
  APInt n;
  for (auto [x, y] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())})
    if (x == iv && matchPattern(y, m_ConstantInt(&n)))
      return n.getSExtValue();
  return std::nullopt;
}

bool kvq::isAnyLaneBranch(scf::IfOp op, const llvm::DenseSet<Value> &varying) {
  if (op.getNumResults() != 0 || !op.getElseRegion().empty())
    return false;
  WalkResult result = op.getThenRegion().walk([&](Operation *nested) {
    bool uniform = llvm::none_of(nested->getOperands(), [&](Value operand) {
      return varying.contains(operand);
    });
    auto add = dyn_cast<memref::AtomicRMWOp>(nested);
    bool adds = add && add.getKind() == arith::AtomicRMWKind::addi &&
                add.getValue().getType().isInteger(32);
    if (!uniform || nested->getNumRegions() ||
        !(isMemoryEffectFree(nested) || isa<memref::StoreOp>(nested) || adds))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

void kvq::widenAnyLaneBranch(OpBuilder &b, scf::IfOp op, Value lanesTaken,
                             IRMapping &mapping) {
  Location loc = op.getLoc();
  bool adds = false;
  op.getThenRegion().walk([&](memref::AtomicRMWOp) { adds = true; });
  // Each addition is made once for all the lanes taking the branch.
  Value count, taken;
  if (!isa<VectorType>(lanesTaken.getType())) {
    assert(!adds && "an addition needs the lanes that take the branch");
    taken = lanesTaken;
  } else if (adds) {
    auto lanesType = cast<VectorType>(lanesTaken.getType());
    Value ones = arith::ExtUIOp::create(b, loc, lanesType.clone(b.getI32Type()),
                                        lanesTaken);
    count =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, ones);
    taken = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, count,
        arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
  } else {
    taken = vector::ReductionOp::create(b, loc, vector::CombiningKind::OR,
                                        lanesTaken);
  }
  auto widened = scf::IfOp::create(b, loc, taken, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(widened.thenBlock()->getTerminator());
  for (Operation &nested : op.thenBlock()->without_terminator()) {
    Operation *clone = b.clone(nested, mapping);
    if (auto add = dyn_cast<memref::AtomicRMWOp>(clone)) {
      b.setInsertionPoint(add);
      add.getValueMutable().assign(
          arith::MulIOp::create(b, loc, add.getValue(), count));
      b.setInsertionPoint(widened.thenBlock()->getTerminator());
    }
  }
}

namespace {

/// A 1-D scf.parallel over [0, N) in steps of 1 as vectors of the host's
/// lanes (the largest power of two up to them dividing N).
struct VectorizeParallelLoop : OpRewritePattern<scf::ParallelOp> {
  VectorizeParallelLoop(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern<scf::ParallelOp>(ctx, /*benefit=*/2), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> count =
        getParallelTripCount(loop, /*withReductions=*/true);
    // A trip count known at run time only (a split's tokens): whole
    // vectors, then the rest.
    if (!count && isRunTimeLoop(loop) && info.vectorLanes > 1)
      return vectorizeLoop(rewriter, loop, info.vectorLanes,
                           /*withRest=*/true);
    if (!count)
      return rewriter.notifyMatchFailure(
          loop, "not one loop over [0, N) in steps of 1");
    unsigned lanes = getLanes(info, unsigned(*count));
    if (lanes == 1)
      return rewriter.notifyMatchFailure(loop, "one lane");
    return vectorizeLoop(rewriter, loop, lanes);
  }

  TargetInfo info;
};

/// parallel c in [0, N) { row ops; r = parallel t reduce; uses of r }
/// whose inner reduction is no vectors itself (a split's value sums: c a
/// channel, t a token, rows read at c): the reduction runs in order, an
/// scf.for, and the outer loop is vectors carrying its K sums through it,
/// as many lanes as keep K sums a lane in getMaxAccumulators registers
/// (AVX-512, 4 heads: 64 channels a pass, 16 accumulators), so that each
/// pass over the tokens reads as much of each row as registers hold.
struct VectorizeAroundReduction : OpRewritePattern<scf::ParallelOp> {
  VectorizeAroundReduction(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern<scf::ParallelOp>(ctx, /*benefit=*/3), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp outer,
                                PatternRewriter &rewriter) const override {
    std::optional<LoopAroundReduction> loop = getLoopAroundReduction(outer);
    if (!loop)
      return rewriter.notifyMatchFailure(outer, "no reduction inside");
    int64_t count = loop->count;
    scf::ParallelOp inner = loop->inner;
    // The inner body must read the outer loop's rows at its induction
    // variable (not, say, a row per head of the inner loop's elements,
    // which are the inner loop's vectors instead), or elements its lanes
    // share (a quantized row's code word and group parameters: fewer lanes
    // where more would cover more than one).
    Value iv = outer.getInductionVars()[0];
    auto takesLanes = [&](unsigned lanes) {
      return Vectorizer(iv, lanes, kMaxLoadStrideAround)
          .analyze(*inner.getBody());
    };
    unsigned lanes = getLanes(info, unsigned(count));
    while (lanes > 1 && !takesLanes(lanes))
      lanes /= 2;
    if (lanes == 1)
      return rewriter.notifyMatchFailure(outer, "inner body not lanes");
    unsigned chunks =
        std::max(1u, getMaxAccumulators(info) / inner.getNumResults());
    while (chunks > 1 && count % (int64_t(lanes) * chunks) != 0)
      chunks /= 2;
    if (std::optional<ValueDotPlan> plan =
            getValueDotPlan(outer, inner, lanes, chunks)) {
      std::tie(plan->rounded, plan->roundedPacks) =
          allocateRoundedFactors(rewriter, outer, plan->dots,
                                 int64_t(chunks / plan->groupChunks) *
                                     plan->factors.size() * kValueDotBlock);
      // The sums on integer dots, a block of tokens at a time. The probe
      // analyzed the body as this does, and the loop has no reductions of
      // its own: it cannot fail after the scratch above.
      LogicalResult widened =
          vectorizeLoop(rewriter, outer, lanes, /*withRest=*/false, chunks,
                        kMaxLoadStrideAround, [&](Vectorizer &vectorizer) {
                          vectorizer.serializeReductions();
                          vectorizer.useValueDots(std::move(*plan));
                        });
      assert(succeeded(widened) && "the probe accepted the loop");
      return widened;
    }
    // Lanes that cover more than a group of codes lose the group's word and
    // parameters, which the lanes share: those chunks are vectors of their
    // own, jammed into one pass over the tokens.
    unsigned wide = lanes * chunks;
    while (wide > lanes && !takesLanes(wide))
      wide /= 2;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(inner);
    rewriter.replaceOp(
        inner, buildSerialLoop(rewriter, inner, inner.getLowerBound()[0],
                               inner.getStep()[0], inner.getInitVals()));
    rewriter.setInsertionPoint(outer);
    // The reduction in order is a rewrite of its own where the loop around
    // it is no vectors.
    (void)vectorizeLoop(rewriter, outer, wide, /*withRest=*/false,
                        lanes * chunks / wide, kMaxLoadStrideAround);
    return success();
  }

  /// The plan of `inner`'s sums on the target's integer dots, if it has
  /// them and `outer` vectors of `lanes` (theirs), `chunks` of them a
  /// pass, take them.
  std::optional<ValueDotPlan> getValueDotPlan(scf::ParallelOp outer,
                                              scf::ParallelOp inner,
                                              unsigned lanes,
                                              unsigned chunks) const {
    std::optional<IntegerDots> dots = IntegerDots::get(info.dot);
    if (!dots)
      return std::nullopt;
    Vectorizer probe(outer.getInductionVars()[0], lanes, kMaxLoadStrideAround);
    probe.serializeReductions();
    if (!probe.analyze(*outer.getBody()))
      return std::nullopt;
    return probe.matchValueDots(inner, *dots, chunks);
  }

  TargetInfo info;
};

struct KVQVectorizeParallelPass
    : kvq::impl::KVQVectorizeParallelBase<KVQVectorizeParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto host : module.getOps<ModuleOp>()) {
      FailureOr<CacheOp> cache = getKernelModuleCache(module, host);
      if (failed(cache))
        return signalPassFailure();
      if (!*cache)
        continue;
      TargetInfo info = getCPUTargetInfo(getCacheTarget(*cache));
      // Rows around their reductions first: the other forms would take the
      // reductions' own loops (the walk visits inner loops first).
      RewritePatternSet rows(&getContext());
      populateVectorizeRowsPatterns(rows, info);
      walkAndApplyPatterns(host, std::move(rows));
      RewritePatternSet patterns(&getContext());
      patterns.add<VectorizeParallelLoop, VectorizeAroundReduction>(
          &getContext(), info);
      populateVectorizeTileCopiesPatterns(patterns, info);
      walkAndApplyPatterns(host, std::move(patterns));
      // After the loops' forms, which read the loads as they are.
      RewritePatternSet loads(&getContext());
      populateOddLoadPatterns(loads);
      walkAndApplyPatterns(host, std::move(loads));
    }
  }
};

} // namespace
