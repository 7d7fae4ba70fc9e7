//===- VectorizeRows.cpp - rows as the lanes around a reduction -----------===//
//
// The host's form of a loop over rows whose body reduces each row:
//
//   parallel t in [0, N) { row t; r = parallel c reduce (...); stores of r }
//
// N known at run time (a split's quantized keys, scored against each head's
// query). The rows are the lanes and the reduction over a row's elements
// runs in order, an scf.for carrying each lane's sums: the elements a
// vector of rows reads then share their code word and group parameters (a
// span=tokens group's codes: 16 tokens' 2-bit codes of a channel are one
// word) where the first lane's row is aligned in its group, which a loop
// over a split's rows does not know. The loop is peeled for it, as loop
// vectorizers peel for an aligned address: the rows before the first
// aligned one run one by one, then vectors of rows, then the rest one by
// one. On a host with integer dots, a reduction of factors times
// dequantized codes is peeled to a group of rows and runs on them
// (IntegerDots.cpp).
//
//===----------------------------------------------------------------------===//

#include "ParallelForms.h"
#include "Vectorizer.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace kvq;

/// The single 1-D reduction directly in `loop`'s body over a constant
/// number of elements, no other parallel loop anywhere in it; null if none.
static scf::ParallelOp getRowReduction(scf::ParallelOp loop) {
  scf::ParallelOp reduction;
  unsigned loops = 0;
  loop.getBody()->walk([&](scf::ParallelOp nested) {
    ++loops;
    if (nested->getParentOp() == loop && nested.getNumResults() != 0)
      reduction = nested;
  });
  if (loops != 1 || !reduction ||
      !getParallelTripCount(reduction, /*withReductions=*/true))
    return {};
  return reduction;
}

/// Whether `value` is computed in `body` by pure ops from the induction
/// variable and values defined outside it.
static bool isPureOfInduction(Value value, Block *body) {
  return llvm::all_of(getSliceInBlock(body, value), [](Operation *op) {
    return isPure(op) && op->getNumRegions() == 0;
  });
}

/// `value` (isPureOfInduction) cloned at `b`, where `mapping` gives the
/// induction variable.
static Value cloneAt(OpBuilder &b, Value value, Block *body,
                     IRMapping &mapping) {
  for (Operation *op : getSliceInBlock(body, value))
    if (!mapping.contains(op->getResult(0)))
      b.clone(*op, mapping);
  return mapping.lookupOrDefault(value);
}

namespace {

struct VectorizeRowsAroundReduction : OpRewritePattern<scf::ParallelOp> {
  VectorizeRowsAroundReduction(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern<scf::ParallelOp>(ctx), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    if (!isRunTimeLoop(loop) || loop.getNumResults() != 0)
      return rewriter.notifyMatchFailure(loop, "not a run-time loop of rows");
    scf::ParallelOp reduction = getRowReduction(loop);
    if (!reduction)
      return rewriter.notifyMatchFailure(loop, "no reduction of a row");
    Value iv = loop.getInductionVars()[0];
    Block *body = loop.getBody();
    // As many lanes as share the rows' words, from the host's; then as
    // many of them a pass as the sums' registers hold.
    for (unsigned lanes = info.vectorLanes; lanes >= 4; lanes /= 2) {
      // Rows that are lanes from any row (full-precision rows of their
      // own) are left to the reduction's lanes.
      Vectorizer plain(iv, lanes);
      plain.serializeReductions();
      if (plain.analyze(*body))
        return rewriter.notifyMatchFailure(loop, "rows aligned anywhere");
      for (Value shifted : plain.getShiftedInductions(*body)) {
        if (!isPureOfInduction(shifted, body))
          continue;
        Vectorizer peeled(iv, lanes);
        peeled.serializeReductions();
        peeled.assumeAligned(shifted, lanes);
        if (!peeled.analyze(*body))
          continue;
        unsigned sums = reduction.getNumResults();
        unsigned chunks =
            std::max(1u, std::min(info.vectorLanes / lanes,
                                  getMaxAccumulators(info) / sums));
        std::optional<IntegerDotPlan> plan =
            getIntegerDotPlan(peeled, reduction);
        if (std::optional<unsigned> group =
                plan ? getIntegerDotGroup(*plan, lanes) : std::nullopt) {
          // A vector iteration in one group of tokens, whose parameters
          // its chunks share: the factors are rounded once for them. Its
          // chunks divide the group, so that no pass straddles two.
          chunks = std::max(
              1u, std::min(*group / lanes, getMaxAccumulators(info) / sums));
          while ((*group / lanes) % chunks != 0)
            --chunks;
          Vectorizer dots(iv, lanes);
          dots.serializeReductions();
          dots.assumeAligned(shifted, lanes * chunks);
          if (dots.analyze(*body)) {
            plan->codeWords = dots.matchCodeWords(*plan, chunks);
            allocateScratch(rewriter, loop, *plan);
            dots.useIntegerDots(std::move(*plan));
            rewrite(rewriter, loop, dots, shifted, lanes, chunks);
            return success();
          }
        }
        rewrite(rewriter, loop, peeled, shifted, lanes, chunks);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(loop, "rows not lanes");
  }

  /// The plan of `reduction` on the target's integer dots, if it has them
  /// and `vectorizer`'s lanes are theirs.
  std::optional<IntegerDotPlan>
  getIntegerDotPlan(const Vectorizer &vectorizer,
                    scf::ParallelOp reduction) const {
    std::optional<IntegerDots> dots = IntegerDots::get(info.dot);
    if (!dots)
      return std::nullopt;
    return vectorizer.matchIntegerDots(reduction, *dots);
  }

  /// The group of tokens whose parameters `plan`'s dequantized codes share
  /// (span=tokens), a multiple of `lanes`; none where they are not such.
  static std::optional<unsigned> getIntegerDotGroup(const IntegerDotPlan &plan,
                                                    unsigned lanes) {
    QuantAttr quant = cast<DequantizeOp>(plan.dequantize).getScheme();
    if (quant.getSpan() != Span::Tokens || quant.getGroup() % lanes != 0)
      return std::nullopt;
    return quant.getGroup();
  }

  /// The scratch `plan` needs, block-local memory at the start of `loop`'s
  /// function: each head's folded factors, and those rounded.
  static void allocateScratch(PatternRewriter &rewriter, scf::ParallelOp loop,
                              IntegerDotPlan &plan) {
    int64_t elements = int64_t(plan.factors.size()) * plan.channels;
    std::tie(plan.rounded, plan.roundedPacks) =
        allocateRoundedFactors(rewriter, loop, plan.dots, elements);
    // The folded factors first, then the rounded ones' bytes.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(plan.rounded.getDefiningOp<memref::ViewOp>()
                                   .getSource()
                                   .getDefiningOp());
    plan.folded = memref::AllocaOp::create(
        rewriter, loop.getLoc(),
        MemRefType::get({elements}, rewriter.getF32Type()), ValueRange(),
        rewriter.getI64IntegerAttr(64));
  }

  /// `loop` as iterations one by one until `shifted` is a multiple of the
  /// lanes' `chunks`, vectors of `chunks` chunks of lanes, and the rest one
  /// by one.
  void rewrite(PatternRewriter &rewriter, scf::ParallelOp loop,
               Vectorizer &vectorizer, Value shifted, unsigned lanes,
               unsigned chunks) const {
    Location loc = loop.getLoc();
    Block *body = loop.getBody();
    auto index = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, value);
    };
    // `shifted` is the induction variable plus a constant k: the first
    // aligned row is (step - k mod step) mod step, at most N.
    int64_t step = int64_t(lanes) * chunks;
    IRMapping atZero;
    atZero.map(loop.getInductionVars()[0], index(0));
    Value k = cloneAt(rewriter, shifted, body, atZero);
    if (!k.getType().isIndex())
      k = arith::IndexCastUIOp::create(rewriter, loc, rewriter.getIndexType(),
                                       k);
    Value count = loop.getUpperBound()[0];
    Value toAligned = arith::RemUIOp::create(
        rewriter, loc,
        arith::SubIOp::create(
            rewriter, loc, index(step),
            arith::RemUIOp::create(rewriter, loc, k, index(step))),
        index(step));
    Value start = arith::MinUIOp::create(rewriter, loc, toAligned, count);
    scf::ForOp::create(rewriter, loc, index(0), start, index(1), {},
                       [&](OpBuilder &b, Location, Value row, ValueRange) {
                         IRMapping mapping;
                         mapping.map(loop.getInductionVars()[0], row);
                         cloneIteration(b, loop, mapping, {});
                         scf::YieldOp::create(b, loc);
                       });
    Value vectorRows = arith::SubIOp::create(rewriter, loc, count, start);
    Value end = arith::AddIOp::create(
        rewriter, loc, start,
        arith::SubIOp::create(
            rewriter, loc, vectorRows,
            arith::RemUIOp::create(rewriter, loc, vectorRows, index(step))));
    // The vector loop exists before its body is widened into it: the
    // widening builds loops with regions of their own inside it.
    auto vectors =
        scf::ForOp::create(rewriter, loc, start, end, index(step), {});
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(vectors.getBody()->getTerminator());
      Value first = vectors.getInductionVar();
      SmallVector<LaneChunk> lanesOf;
      for (unsigned c = 0; c < chunks; ++c)
        lanesOf.emplace_back(c == 0
                                 ? first
                                 : arith::AddIOp::create(rewriter, loc, first,
                                                         index(c * lanes)));
      vectorizer.widen(*body, rewriter, lanesOf);
    }
    buildSerialLoop(rewriter, loop, end, index(1), {});
    rewriter.eraseOp(loop);
  }

  TargetInfo info;
};

} // namespace

void kvq::populateVectorizeRowsPatterns(RewritePatternSet &patterns,
                                        const TargetInfo &info) {
  patterns.add<VectorizeRowsAroundReduction>(patterns.getContext(), info);
}
