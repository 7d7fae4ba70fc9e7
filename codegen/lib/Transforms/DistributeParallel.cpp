//===- DistributeParallel.cpp - channel loops over a GPU block's threads --===//
//
// The GPU's form of a kernel program's `scf.parallel`: the block's threads
// take its iterations in turn (thread i the iterations i, i + threads, ...)
// and meet at a barrier after it, so that what one thread wrote is what
// every thread reads next; its reductions are combined across the block by
// gpu.all_reduce. First a parallel loop over the rows of another
// is made one loop over both, and a sequential loop around a parallel loop
// whose iterations each keep to their own elements is turned inside out:
// each thread then runs the whole sequence for its elements, with no
// barrier per step, and LLVM keeps their values in registers. The loops
// left inside another then take their GPU forms (DistributeNested.cpp).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "ParallelForms.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQDISTRIBUTEPARALLEL
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// Whether iteration `iv` of `loop`'s body touches, of every memref it
/// stores to, only the element at `iv` (its last index, the other indices
/// and the memref defined outside `outer`): then iterations with different
/// `iv` never meet across the steps of `outer`.
static bool keepsToItsElements(scf::ParallelOp loop, scf::ForOp outer) {
  Value iv = loop.getInductionVars()[0];
  llvm::SmallPtrSet<Value, 4> stored;
  bool ok = true;
  loop.walk([&](Operation *op) {
    if (isa<memref::StoreOp>(op))
      stored.insert(getMemRefAccess(op).first);
    else if (!isArithmetic(op) && !isa<memref::LoadOp>(op))
      ok = false;
  });
  if (!ok)
    return false;
  for (Value memref : stored)
    if (outer->isAncestor(memref.getParentBlock()->getParentOp()))
      return false;
  WalkResult result = loop.walk([&](Operation *op) {
    auto [memref, indices] = getMemRefAccess(op);
    if (!memref || !stored.contains(memref))
      return WalkResult::advance();
    if (indices.empty() || indices.back() != iv ||
        llvm::any_of(indices.drop_back(), [&](Value index) {
          return outer->isAncestor(index.getParentBlock()->getParentOp());
        }))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

namespace {

/// for t { parallel c { body } } -> parallel c { for t { body } }, where
/// iteration c keeps to its own elements.
struct InterchangeParallelOutward : OpRewritePattern<scf::ForOp> {
  using OpRewritePattern<scf::ForOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ForOp outer,
                                PatternRewriter &rewriter) const override {
    // The for's body: arithmetic (addresses of the step's rows, which each
    // thread computes for itself), then the parallel loop.
    Block *body = outer.getBody();
    auto inner = dyn_cast_if_present<scf::ParallelOp>(
        body->getTerminator()->getPrevNode());
    if (outer.getNumResults() != 0 || !inner || inner.getNumLoops() != 1 ||
        inner.getNumResults() != 0 ||
        llvm::any_of(llvm::make_range(body->begin(), inner->getIterator()),
                     [](Operation &op) {
                       return op.getNumRegions() || !isArithmetic(&op);
                     }))
      return rewriter.notifyMatchFailure(outer, "not a for around a parallel");
    // Bounds from outside the for, or constants (cloned out of it).
    auto isInside = [&](Value bound) {
      return outer->isAncestor(bound.getParentBlock()->getParentOp());
    };
    for (Value bound : llvm::concat<Value>(
             inner.getLowerBound(), inner.getUpperBound(), inner.getStep()))
      if (isInside(bound) && !matchPattern(bound, m_Constant()))
        return rewriter.notifyMatchFailure(outer, "bounds vary with the for");
    if (!keepsToItsElements(inner, outer))
      return rewriter.notifyMatchFailure(outer, "iterations share elements");
    Location loc = outer.getLoc();
    auto hoistAll = [&](ValueRange bounds) {
      return llvm::map_to_vector(bounds, [&](Value bound) -> Value {
        return isInside(bound)
                   ? rewriter.clone(*bound.getDefiningOp())->getResult(0)
                   : bound;
      });
    };
    scf::ParallelOp::create(
        rewriter, loc, hoistAll(inner.getLowerBound()),
        hoistAll(inner.getUpperBound()), hoistAll(inner.getStep()),
        [&](OpBuilder &b, Location, ValueRange ivs) {
          auto loop =
              scf::ForOp::create(b, loc, outer.getLowerBound(),
                                 outer.getUpperBound(), outer.getStep());
          IRMapping mapping;
          mapping.map(outer.getInductionVar(), loop.getInductionVar());
          mapping.map(inner.getInductionVars(), ivs);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(loop.getBody()->getTerminator());
          for (Operation &op :
               llvm::make_range(body->begin(), inner->getIterator()))
            b.clone(op, mapping);
          for (Operation &op : inner.getBody()->without_terminator())
            b.clone(op, mapping);
        });
    rewriter.eraseOp(outer);
    return success();
  }
};

/// Whether the ops of `block` before `end` only compute and read (a row's
/// addresses and views, its loops' bounds).
static bool isRowPrefix(Block *block, Operation *end) {
  return llvm::all_of(llvm::make_range(block->begin(), end->getIterator()),
                      [](Operation &op) {
                        return !op.getNumRegions() &&
                               (isArithmetic(&op) || isa<memref::LoadOp>(op));
                      });
}

/// The parallel loops over a row that end `body` (before its terminator):
/// one parallel loop, or both branches of an `scf.if` each one parallel
/// loop of the same constant trip count (a choice made once per row);
/// empty otherwise.
static SmallVector<scf::ParallelOp> getRowLoops(Block *body) {
  Operation *last = body->getTerminator()->getPrevNode();
  if (auto loop = dyn_cast_if_present<scf::ParallelOp>(last))
    return getParallelTripCount(loop) ? SmallVector<scf::ParallelOp>{loop}
                                      : SmallVector<scf::ParallelOp>();
  auto branch = dyn_cast_if_present<scf::IfOp>(last);
  if (!branch || branch.getNumResults() || branch.getElseRegion().empty())
    return {};
  SmallVector<scf::ParallelOp> loops;
  for (Block *block : {branch.thenBlock(), branch.elseBlock()}) {
    auto loop = dyn_cast_if_present<scf::ParallelOp>(
        block->getTerminator()->getPrevNode());
    if (!loop || !isRowPrefix(block, loop))
      return {};
    loops.push_back(loop);
  }
  std::optional<int64_t> count = getParallelTripCount(loops[0]);
  if (!count || getParallelTripCount(loops[1]) != count)
    return {};
  return loops;
}

/// parallel t { ops; parallel c { body } } -> parallel i { t = i / C;
/// c = i mod C; ops; body }, where the ops only compute and read (the
/// addresses and views of row t): the block's threads then share all of
/// the iterations, with one barrier. A row that picks one of two loops
/// (`scf.if` { parallel c } else { parallel c }) keeps its choice around
/// the two bodies.
struct FlattenNestedParallel : OpRewritePattern<scf::ParallelOp> {
  using OpRewritePattern<scf::ParallelOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ParallelOp outer,
                                PatternRewriter &rewriter) const override {
    Block *body = outer.getBody();
    std::optional<int64_t> rows = getParallelTripCount(outer);
    SmallVector<scf::ParallelOp> inner = getRowLoops(body);
    Operation *last = body->getTerminator()->getPrevNode();
    if (!rows || inner.empty() || !isRowPrefix(body, last))
      return rewriter.notifyMatchFailure(outer, "not a row of a parallel");
    int64_t columns = *getParallelTripCount(inner[0]);
    Location loc = outer.getLoc();
    auto constant = [&](int64_t value) {
      return arith::ConstantIndexOp::create(rewriter, loc, value);
    };
    Value count = constant(columns);
    scf::ParallelOp::create(
        rewriter, loc, ValueRange{constant(0)},
        ValueRange{constant(*rows * columns)}, ValueRange{constant(1)},
        [&](OpBuilder &b, Location, ValueRange ivs) {
          IRMapping mapping;
          mapping.map(outer.getInductionVars()[0],
                      arith::DivUIOp::create(b, loc, ivs[0], count));
          Value column = arith::RemUIOp::create(b, loc, ivs[0], count);
          for (scf::ParallelOp loop : inner)
            mapping.map(loop.getInductionVars()[0], column);
          for (Operation &op :
               llvm::make_range(body->begin(), last->getIterator()))
            b.clone(op, mapping);
          // A loop's body, after what its block computes before it.
          auto cloneBody = [&](OpBuilder &to, scf::ParallelOp loop) {
            Block *block = loop->getBlock();
            if (block != body)
              for (Operation &op :
                   llvm::make_range(block->begin(), loop->getIterator()))
                to.clone(op, mapping);
            for (Operation &op : loop.getBody()->without_terminator())
              to.clone(op, mapping);
          };
          if (inner.size() == 1)
            return cloneBody(b, inner[0]);
          scf::IfOp::create(
              b, loc,
              mapping.lookupOrDefault(cast<scf::IfOp>(last).getCondition()),
              [&](OpBuilder &to, Location) {
                cloneBody(to, inner[0]);
                scf::YieldOp::create(to, loc);
              },
              [&](OpBuilder &to, Location) {
                cloneBody(to, inner[1]);
                scf::YieldOp::create(to, loc);
              });
        });
    rewriter.eraseOp(outer);
    return success();
  }
};

/// A 1-D scf.parallel as a loop over the block's threads, then a barrier.
/// Its reductions (each a combiner with an identity) are carried by each
/// thread from the identity, combined across the block by `gpu.all_reduce`
/// (every thread gets the result), then with the loop's initial value.
struct DistributeParallelLoop : OpRewritePattern<scf::ParallelOp> {
  DistributeParallelLoop(MLIRContext *ctx, unsigned blockThreads)
      : OpRewritePattern<scf::ParallelOp>(ctx), blockThreads(blockThreads) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    if (loop.getNumLoops() != 1)
      return rewriter.notifyMatchFailure(loop, "not one loop");
    std::optional<SmallVector<TypedAttr>> identities =
        getReductionIdentities(loop);
    if (!identities)
      return rewriter.notifyMatchFailure(loop, "a reduction of no identity");
    Location loc = loop.getLoc();
    Value step = loop.getStep()[0];
    Value thread = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value first = arith::AddIOp::create(
        rewriter, loc, loop.getLowerBound()[0],
        arith::MulIOp::create(rewriter, loc, thread, step));
    Value stride = arith::MulIOp::create(
        rewriter, loc, step,
        arith::ConstantIndexOp::create(rewriter, loc, blockThreads));
    SmallVector<Value> shares;
    for (TypedAttr identity : *identities)
      shares.push_back(arith::ConstantOp::create(rewriter, loc, identity));
    auto reduce = cast<scf::ReduceOp>(loop.getBody()->getTerminator());
    scf::ForOp threadLoop =
        buildSerialLoop(rewriter, loop, first, stride, shares);
    SmallVector<Value> results;
    for (auto [k, init] : llvm::enumerate(loop.getInitVals())) {
      Block &combiner = reduce.getReductions()[k].front();
      auto all = gpu::AllReduceOp::create(
          rewriter, loc, threadLoop.getResult(k), gpu::AllReduceOperationAttr(),
          /*uniform=*/true);
      {
        OpBuilder::InsertionGuard guard(rewriter);
        Type type = init.getType();
        Block *block =
            rewriter.createBlock(&all.getBody(), {}, {type, type}, {loc, loc});
        gpu::YieldOp::create(rewriter, loc,
                             combineByReduction(rewriter, combiner,
                                                block->getArgument(0),
                                                block->getArgument(1)));
      }
      results.push_back(
          combineByReduction(rewriter, combiner, init, all.getResult()));
    }
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.replaceOp(loop, results);
    return success();
  }

  unsigned blockThreads;
};

struct KVQDistributeParallelPass
    : kvq::impl::KVQDistributeParallelBase<KVQDistributeParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto device : module.getOps<gpu::GPUModuleOp>()) {
      FailureOr<CacheOp> cache = getKernelModuleCache(module, device);
      if (failed(cache))
        return signalPassFailure();
      if (*cache)
        distribute(device, getGPUTargetInfo(getCacheTarget(*cache)));
    }
  }

  void distribute(gpu::GPUModuleOp device, const TargetInfo &info) {
    MLIRContext *ctx = &getContext();
    // A stream's page ahead is the host's caches' need: a GPU thread keeps
    // its own loads in flight instead (kvq-pipeline-loads), and a loop
    // whose body asks for lines is no row run's.
    device.walk([](memref::PrefetchOp prefetch) { prefetch.erase(); });
    RewritePatternSet interchange(ctx);
    interchange.add<FlattenNestedParallel, InterchangeParallelOutward>(ctx);
    walkAndApplyPatterns(device, std::move(interchange));
    distributeNestedLoops(device, info);
    RewritePatternSet distribute(ctx);
    distribute.add<DistributeParallelLoop>(ctx, info.blockThreads);
    walkAndApplyPatterns(device, std::move(distribute));
  }
};

} // namespace
