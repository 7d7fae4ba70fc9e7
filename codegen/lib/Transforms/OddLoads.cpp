//===- OddLoads.cpp - loads of odd vectors as masked loads on the CPU -----===//
//
// A group of 3-bit codes fills 3 words. LLVM legalizes a load of
// vector<3xi32> on x86 as scalar loads and inserts (a dozen instructions a
// group in the attend program's loops). A masked load of the next power of
// two's lanes, the lanes past the vector's masked off so that nothing past
// it is read, is one instruction (`vmovdqu32` with a mask register on
// AVX-512, `vpmaskmovd` on AVX2).
//
//===----------------------------------------------------------------------===//

#include "ParallelForms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

namespace {

struct MaskOddLoad : OpRewritePattern<vector::LoadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(vector::LoadOp op,
                                PatternRewriter &rewriter) const override {
    VectorType type = op.getVectorType();
    if (type.getRank() != 1 || type.isScalable())
      return failure();
    int64_t lanes = type.getNumElements();
    if (lanes < 2 || llvm::isPowerOf2_64(lanes))
      return failure();
    Location loc = op.getLoc();
    auto wide = VectorType::get({int64_t(llvm::PowerOf2Ceil(lanes))},
                                type.getElementType());
    SmallVector<bool> lanesRead(wide.getNumElements(), false);
    std::fill_n(lanesRead.begin(), lanes, true);
    Value mask = arith::ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(
            VectorType::get(wide.getShape(), rewriter.getI1Type()),
            ArrayRef<bool>(lanesRead)));
    Value zeros = arith::ConstantOp::create(rewriter, loc, wide,
                                            rewriter.getZeroAttr(wide));
    Value loaded = vector::MaskedLoadOp::create(
        rewriter, loc, wide, op.getBase(), op.getIndices(), mask, zeros,
        llvm::MaybeAlign(op.getAlignment().value_or(0)));
    rewriter.replaceOpWithNewOp<vector::ShuffleOp>(
        op, loaded, loaded, llvm::to_vector(llvm::seq<int64_t>(0, lanes)));
    return success();
  }
};

} // namespace

void kvq::populateOddLoadPatterns(RewritePatternSet &patterns) {
  patterns.add<MaskOddLoad>(patterns.getContext());
}
