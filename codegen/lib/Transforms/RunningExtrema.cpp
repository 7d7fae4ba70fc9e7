//===- RunningExtrema.cpp - running min/max as the target's min/max -------===//
//
// A kernel program writes a running extremum as compare and select, which
// every target computes exactly and x86 in one instruction (vminps). Where
// the target has min/max skipping a NaN as one instruction (the GPU's
// min.f32), a loop-carried extremum whose accumulator can never be NaN is
// rewritten to it: minnum(acc, x) is the select's result wherever acc is
// not NaN.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQRUNNINGEXTREMA
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// The intrinsic a select yielded as iteration argument `acc` computes, if
/// it is select(x < acc, x, acc) (minnum) or select(x > acc, x, acc)
/// (maxnum); empty otherwise.
static StringRef getExtremum(arith::SelectOp select, Value acc) {
  auto compare = select.getCondition().getDefiningOp<arith::CmpFOp>();
  if (!compare || select.getFalseValue() != acc ||
      compare.getLhs() != select.getTrueValue() || compare.getRhs() != acc)
    return {};
  if (compare.getPredicate() == arith::CmpFPredicate::OLT)
    return "llvm.minnum";
  if (compare.getPredicate() == arith::CmpFPredicate::OGT)
    return "llvm.maxnum";
  return {};
}

namespace {

/// An scf.for's running extrema: iteration arguments that start at a
/// constant that is no NaN and are yielded as getExtremum's selects.
struct RunningExtremumAsMinMax : OpRewritePattern<scf::ForOp> {
  using OpRewritePattern<scf::ForOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ForOp loop,
                                PatternRewriter &rewriter) const override {
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    bool changed = false;
    for (auto [init, acc, next] :
         llvm::zip(loop.getInitArgs(), loop.getRegionIterArgs(),
                   yield.getOperands())) {
      FloatAttr start;
      auto select = next.getDefiningOp<arith::SelectOp>();
      if (!select || !matchPattern(init, m_Constant(&start)) ||
          start.getValue().isNaN())
        continue;
      StringRef name = getExtremum(select, acc);
      if (name.empty())
        continue;
      rewriter.setInsertionPoint(select);
      Value x = select.getTrueValue();
      rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
          select, select.getType(), rewriter.getStringAttr(name),
          ValueRange{acc, x});
      changed = true;
    }
    return success(changed);
  }
};

struct KVQRunningExtremaPass
    : kvq::impl::KVQRunningExtremaBase<KVQRunningExtremaPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto rewrite = [&](Operation *module, const TargetInfo &info) {
      if (!info.minMaxNum)
        return success();
      RewritePatternSet patterns(ctx);
      patterns.add<RunningExtremumAsMinMax>(ctx);
      walkAndApplyPatterns(module, std::move(patterns));
      return success();
    };
    if (failed(forEachKernelModule(getOperation(), rewrite)))
      signalPassFailure();
  }
};

} // namespace
