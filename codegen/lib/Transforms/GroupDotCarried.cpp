//===- GroupDotCarried.cpp - group dots carried across their loop ---------===//
//
// A loop that sums a row's group dots (a token's key groups, a channel's
// value groups) reduces each dot's products across the lanes once a group.
// On a CPU that is a tree of shuffles and adds per head and group, more
// than the dot itself. Folded, the products of each group are
// tile * (slope * codes) and offset * sum: the loop carries the first as a
// vector a head and the second as a scalar, and reduces the vectors once
// after it.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

namespace {

/// Whether `region`, an scf.reduce combiner, returns the sum of its two
/// arguments.
bool isSum(Region &region) {
  Block &block = region.front();
  if (!llvm::hasSingleElement(block.without_terminator()))
    return false;
  auto add = dyn_cast<arith::AddFOp>(block.front());
  auto result = dyn_cast<scf::ReduceReturnOp>(block.getTerminator());
  if (!add || !result || result.getResult() != add.getResult())
    return false;
  Value x = block.getArgument(0), y = block.getArgument(1);
  return (add.getLhs() == x && add.getRhs() == y) ||
         (add.getLhs() == y && add.getRhs() == x);
}

/// The kvq.group_dot whose dots, in order, are all `loop`'s sums, or null.
GroupDotOp getSummedGroupDot(scf::ParallelOp loop) {
  if (loop.getNumLoops() != 1 || loop.getNumReductions() == 0)
    return {};
  auto reduce = cast<scf::ReduceOp>(loop.getBody()->getTerminator());
  auto dot = reduce.getOperands().front().getDefiningOp<GroupDotOp>();
  if (!dot || dot->getBlock() != loop.getBody() ||
      ValueRange(reduce.getOperands()) != ValueRange(dot.getDots()))
    return {};
  for (Value result : dot.getDots()) {
    if (!result.hasOneUse())
      return {};
  }
  for (Region &region : reduce.getReductions()) {
    if (!isSum(region))
      return {};
  }
  return dot;
}

struct CarryGroupDots : OpRewritePattern<scf::ParallelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    GroupDotOp dot = getSummedGroupDot(loop);
    if (!dot)
      return failure();
    Location loc = dot.getLoc();
    KernelBuilder kb(rewriter, loc);
    kb.setReassociate(true);
    auto tileType = cast<VectorType>(dot.getTiles().front().getType());
    unsigned heads = dot.getDots().size();
    // A vector of products and a scalar of offsets a head; the loop's inits
    // start the scalars.
    SmallVector<Value> inits;
    Value zeros = arith::ConstantOp::create(rewriter, loc, tileType,
                                            rewriter.getZeroAttr(tileType));
    inits.append(heads, zeros);
    llvm::append_range(inits, loop.getInitVals());
    auto carried = scf::ParallelOp::create(
        rewriter, loop.getLoc(), loop.getLowerBound(), loop.getUpperBound(),
        loop.getStep(), inits, nullptr);
    if (!carried.getBody()->empty())
      rewriter.eraseOp(carried.getBody()->getTerminator());
    rewriter.mergeBlocks(loop.getBody(), carried.getBody(),
                         carried.getInductionVars());
    auto reduce = cast<scf::ReduceOp>(carried.getBody()->getTerminator());

    rewriter.setInsertionPoint(dot);
    Value codes = kb.uitofp(dot.getCodes());
    Value slopes = kb.splat(dot.getSlope(), tileType.getNumElements());
    Value scaled = kb.fmul(codes, slopes);
    SmallVector<Value> terms;
    for (Value tile : dot.getTiles())
      terms.push_back(kb.fmul(tile, scaled));
    for (Value sum : dot.getSums())
      terms.push_back(kb.fmul(dot.getOffset(), sum));
    rewriter.setInsertionPoint(reduce);
    auto sums = scf::ReduceOp::create(rewriter, loc, terms);
    for (Region &region : sums.getReductions()) {
      Block *combiner = &region.front();
      rewriter.setInsertionPointToEnd(combiner);
      scf::ReduceReturnOp::create(
          rewriter, loc,
          kb.fadd(combiner->getArgument(0), combiner->getArgument(1)));
    }
    rewriter.eraseOp(reduce);
    rewriter.eraseOp(dot);

    rewriter.setInsertionPointAfter(carried);
    SmallVector<Value> results;
    for (unsigned r = 0; r < heads; ++r)
      results.push_back(vector::ReductionOp::create(
          rewriter, loc, vector::CombiningKind::ADD, carried.getResult(r),
          carried.getResult(heads + r),
          arith::FastMathFlags::reassoc | arith::FastMathFlags::contract));
    rewriter.replaceOp(loop, results);
    return success();
  }
};

} // namespace

void kvq::populateCarriedGroupDotPatterns(RewritePatternSet &patterns) {
  patterns.add<CarryGroupDots>(patterns.getContext());
}
