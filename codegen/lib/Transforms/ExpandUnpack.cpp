//===- ExpandUnpack.cpp - kvq.unpack to vector permutes and shifts --------===//
//
// A lane's code sits at a compile-time bit position, so unpacking is a
// permute of the words to the lanes and a per-lane shift. Where a code
// straddles two words, a funnel shift of the word and its successor.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDUNPACK
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct ExpandUnpack : OpRewritePattern<UnpackOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnpackOp op,
                                PatternRewriter &rewriter) const override {
    KernelBuilder kb(rewriter, op.getLoc());
    int64_t lanes = op.getCodes().getType().getNumElements();
    int64_t words = op.getWords().getType().getNumElements();
    unsigned bits = op.getBits();
    SmallVector<int64_t> low, high;
    SmallVector<int32_t> shifts;
    bool straddles = false;
    for (int64_t j = 0; j < lanes; ++j) {
      int64_t bit = op.getOffset() + j * op.getStride();
      low.push_back(bit / 32);
      high.push_back(std::min(bit / 32 + 1, words - 1));
      shifts.push_back(bit % 32);
      straddles |= bit % 32 + bits > 32;
    }
    Value source = op.getWords();
    Value lo = kb.shuffle(source, low);
    Value shift = kb.vectorI32(shifts);
    Value code = straddles
                     ? kb.callIntrinsic("llvm.fshr",
                                        {kb.shuffle(source, high), lo, shift})
                     : kb.shrU(lo, shift);
    rewriter.replaceOp(
        op, kb.bitAnd(code, kb.splat(kb.i32((1u << bits) - 1), lanes)));
    return success();
  }
};

struct KVQExpandUnpackPass
    : kvq::impl::KVQExpandUnpackBase<KVQExpandUnpackPass> {
  void runOnOperation() override {
    // One walk, each kvq.unpack rewritten once (a greedy driver would fold
    // every kernel of the module again).
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandUnpack>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
