//===- GroupDotLanes.cpp - group dots summed in the lanes around ----------===//
//
// A loop over a row's channels around the sum of each channel's value
// groups (a span=tokens value slice, whose channel's group of 32 tokens'
// codes lies beside the next channel's) is, on a CPU, best vectors of
// channels: each lane sums its own group's elements one after another,
// every tile element (a token's weight, the same in every lane) broadcast
// once for all lanes, the codes shifted out of words that the lanes load
// side by side. The carried form would take the group's elements as the
// lanes instead and unpack every channel's codes across them, about twice
// the instructions. So each such dot is first summed element by element,
// where the loop around then vectorizes; kvq-vectorize-parallel makes the
// lanes (VectorizeAroundReduction).
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"
#include "Vectorizer.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

namespace {

/// The load of `dot`'s code words where they are a kvq.unpack of a 1-D
/// vector.load, or null.
vector::LoadOp getWordsLoad(GroupDotOp dot) {
  auto unpack = dot.getCodes().getDefiningOp<UnpackOp>();
  if (!unpack)
    return {};
  auto load = unpack.getWords().getDefiningOp<vector::LoadOp>();
  return load && load.getVectorType().getRank() == 1 ? load : nullptr;
}

/// Replaces `dot` by its dots summed element by element, at `b`: the
/// words loaded one by one beside the vector load, each code at its
/// compile-time position, each tile's products in order, the parameters
/// folded after.
void sumByElements(OpBuilder &b, GroupDotOp dot, vector::LoadOp wordsLoad) {
  Location loc = dot.getLoc();
  b.setInsertionPoint(dot);
  KernelBuilder kb(b, loc);
  // The op's sums are in any order, with fused multiply-adds.
  kb.setReassociate(true);
  SmallVector<Value> indices(wordsLoad.getIndices());
  Value first = indices.back();
  SmallVector<Value> words;
  for (int64_t j = 0; j < wordsLoad.getVectorType().getNumElements(); ++j) {
    indices.back() = arith::AddIOp::create(
        b, loc, first, arith::ConstantIndexOp::create(b, loc, j));
    words.push_back(
        memref::LoadOp::create(b, loc, wordsLoad.getBase(), indices));
  }
  auto unpack = dot.getCodes().getDefiningOp<UnpackOp>();
  int64_t elements = unpack.getCodes().getType().getNumElements();
  SmallVector<Value> sums(dot.getTiles().size());
  for (int64_t k = 0; k < elements; ++k) {
    unsigned bit = unpack.getOffset() + k * unpack.getStride();
    Value code = kb.uitofp(extractCode(kb, words, bit, unpack.getBits()));
    for (auto [tile, sum] : llvm::zip(dot.getTiles(), sums)) {
      Value element = vector::ExtractOp::create(b, loc, tile, k);
      Value product = kb.fmul(element, code);
      sum = sum ? kb.fadd(sum, product) : product;
    }
  }
  AffineTerms terms{dot.getSlope(), dot.getOffset()};
  for (auto [sum, tileSum] : llvm::zip(sums, dot.getSums()))
    sum = foldAffineDot(kb, terms, sum, tileSum);
  dot.replaceAllUsesWith(sums);
  dot.erase();
  if (unpack.use_empty())
    unpack.erase();
  if (wordsLoad.use_empty())
    wordsLoad.erase();
}

struct SumGroupDotsInLanes : OpRewritePattern<scf::ParallelOp> {
  SumGroupDotsInLanes(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern(ctx), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp outer,
                                PatternRewriter &rewriter) const override {
    std::optional<LoopAroundReduction> loop = getLoopAroundReduction(outer);
    if (!loop || loop->count == 0)
      return rewriter.notifyMatchFailure(outer, "no reduction inside");
    GroupDotOp dot = getSummedGroupDot(loop->inner);
    vector::LoadOp wordsLoad = dot ? getWordsLoad(dot) : nullptr;
    if (!wordsLoad)
      return rewriter.notifyMatchFailure(outer, "no group dot of loaded codes");
    // The form on a copy of the reduction, kept where the loop around takes
    // it as lanes (the codes of adjacent lanes a few words apart): a loop
    // of lanes the Vectorizer cannot widen would sum one lane at a time.
    IRMapping mapping;
    auto trial = cast<scf::ParallelOp>(loop->inner->clone(mapping));
    OpBuilder b(rewriter.getContext());
    sumByElements(
        b, cast<GroupDotOp>(mapping.lookup(dot.getOperation())),
        cast<vector::LoadOp>(mapping.lookup(wordsLoad.getOperation())));
    Value iv = outer.getInductionVars()[0];
    auto takesLanes = [&](unsigned lanes) {
      return Vectorizer(iv, lanes, kMaxLoadStrideAround)
          .analyze(*trial.getBody());
    };
    unsigned lanes = getLanes(info, unsigned(loop->count));
    while (lanes > 1 && !takesLanes(lanes))
      lanes /= 2;
    if (lanes == 1) {
      trial->erase();
      return rewriter.notifyMatchFailure(outer, "the lanes' codes are apart");
    }
    rewriter.setInsertionPoint(loop->inner);
    rewriter.insert(trial);
    rewriter.replaceOp(loop->inner, trial->getResults());
    return success();
  }

  TargetInfo info;
};

} // namespace

void kvq::populateLaneGroupDotPatterns(RewritePatternSet &patterns,
                                       const TargetInfo &info) {
  patterns.add<SumGroupDotsInLanes>(patterns.getContext(), info);
}
