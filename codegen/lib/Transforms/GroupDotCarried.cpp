//===- GroupDotCarried.cpp - group dots carried across their loop ---------===//
//
// A loop that sums a row's group dots (a token's key groups, a channel's
// value groups) reduces each dot's products across the lanes once a group.
// On a CPU that is a tree of shuffles and adds per head and group, more
// than the dot itself. Here the loop carries each head's products with the
// reconstructed group, tile * (slope * codes + offset), as a vector, and
// reduces it once after the loop; the reconstruction is one multiply-add a
// lane that all heads share, so the tiles' sums are not read. Where the
// heads' vectors would take more registers than the target keeps sums in
// (a 32-element group's 4 heads on AVX2: 16 of its 16 registers), each
// head's products are halved first, so that the sums stay in registers
// rather than pass through the stack every iteration.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"
#include "ParallelForms.h"

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

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

struct CarryGroupDots : OpRewritePattern<scf::ParallelOp> {
  CarryGroupDots(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern(ctx), registerLanes(info.vectorLanes),
        accumulators(getMaxAccumulators(info)) {}

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
    int64_t sumLanes = getCarriedLanes(tileType.getNumElements(), heads);
    // A vector of products a head, from zero; the loop's inits join them
    // after it.
    auto carriedType = VectorType::get({sumLanes}, tileType.getElementType());
    Value zeros = arith::ConstantOp::create(rewriter, loc, carriedType,
                                            rewriter.getZeroAttr(carriedType));
    auto carried = scf::ParallelOp::create(
        rewriter, loop.getLoc(), loop.getLowerBound(), loop.getUpperBound(),
        loop.getStep(), SmallVector<Value>(heads, zeros), nullptr);
    if (!carried.getBody()->empty())
      rewriter.eraseOp(carried.getBody()->getTerminator());
    rewriter.mergeBlocks(loop.getBody(), carried.getBody(),
                         carried.getInductionVars());
    auto reduce = cast<scf::ReduceOp>(carried.getBody()->getTerminator());

    // The group reconstructed, one multiply-add a lane for all heads: the
    // tiles' sums are not needed.
    rewriter.setInsertionPoint(dot);
    unsigned lanes = tileType.getNumElements();
    Value codes = kb.uitofp(dot.getCodes());
    Value slopes = kb.splat(dot.getSlope(), lanes);
    Value offsets = kb.splat(dot.getOffset(), lanes);
    Value elements = kb.fadd(kb.fmul(codes, slopes), offsets);
    SmallVector<Value> products;
    for (Value tile : dot.getTiles())
      products.push_back(kb.fmul(tile, elements));
    auto add = [&](Value x, Value y) { return kb.fadd(x, y); };
    halveEach(kb, products, sumLanes, add);
    rewriter.setInsertionPoint(reduce);
    auto sums = scf::ReduceOp::create(rewriter, loc, products);
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
    rewriter.replaceOp(loop,
                       sumEach(kb, carried.getResults(), loop.getInitVals()));
    return success();
  }

  /// The lanes of each of `heads` heads' carried products, from a tile's
  /// `lanes`: halved while the heads' vectors take more registers than
  /// `accumulators`, down to a register's.
  int64_t getCarriedLanes(int64_t lanes, unsigned heads) const {
    auto registers = [&](int64_t width) {
      return heads * llvm::divideCeil(width, registerLanes);
    };
    while (lanes > registerLanes && lanes % 2 == 0 &&
           registers(lanes) > accumulators)
      lanes /= 2;
    return lanes;
  }

  /// Each of `vectors`' lanes summed, plus `inits`: the vectors reduced
  /// together where they are a power of two (KernelBuilder::combineEach),
  /// after each is halved down to a register's lanes.
  SmallVector<Value> sumEach(KernelBuilder &kb, ValueRange vectors,
                             ValueRange inits) const {
    auto add = [&](Value x, Value y) { return kb.fadd(x, y); };
    SmallVector<Value> sums;
    SmallVector<Value> halved(vectors);
    halveEach(kb, halved, registerLanes, add);
    int64_t lanes = cast<VectorType>(halved[0].getType()).getNumElements();
    if (halved.size() > 1 &&
        KernelBuilder::combinesEach(halved.size(), lanes)) {
      Value each = kb.combineEach(halved, add);
      for (auto [r, init] : llvm::enumerate(inits)) {
        Value sum = vector::ExtractOp::create(kb.builder(), kb.getLoc(), each,
                                              ArrayRef<int64_t>{int64_t(r)});
        // A sum from +0 (parallelSum's) is the lanes' sum.
        sums.push_back(
            matchPattern(init, m_PosZeroFloat()) ? sum : kb.fadd(sum, init));
      }
      return sums;
    }
    for (auto [vector, init] : llvm::zip(halved, inits))
      sums.push_back(vector::ReductionOp::create(
          kb.builder(), kb.getLoc(), vector::CombiningKind::ADD, vector, init,
          arith::FastMathFlags::reassoc | arith::FastMathFlags::contract));
    return sums;
  }

  /// The f32 lanes of the target's vector registers.
  unsigned registerLanes;
  /// The registers a loop keeps its sums in (getMaxAccumulators).
  unsigned accumulators;
};

} // namespace

GroupDotOp kvq::getSummedGroupDot(scf::ParallelOp loop) {
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

void kvq::populateCarriedGroupDotPatterns(RewritePatternSet &patterns,
                                          const TargetInfo &info) {
  patterns.add<CarryGroupDots>(patterns.getContext(), info);
}
