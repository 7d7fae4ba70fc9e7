//===- DistributeNested.cpp - parallel loops inside another on the GPU ---===//
//
// kvq-distribute-parallel's forms of a parallel loop inside another, run
// before the outer loops are spread over the block's threads, one sweep
// each, in this order:
// - a loop over a row's elements around a reduction that reads aligned
//   rows at them (a split's value sums: channels around a sum over tokens)
//   takes a run of TargetInfo::loadBytes of elements an iteration, each
//   row's run one vector.load;
// - a loop of a few iterations around a reduction (a few heads' statistics,
//   those runs) makes each iteration a team of a warp's threads, their
//   shares combined by a butterfly of gpu.shuffle xor;
// - any other loop inside another is its thread's own: in order, its
//   reductions scalar accumulators, its rows read loadBytes at a time where
//   their alignment is known (a token's dots over its channels).
//
//===----------------------------------------------------------------------===//

#include "ParallelForms.h"

#include "kvq/Codegen/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <numeric>

using namespace mlir;
using namespace kvq;

/// The identities of `loop`'s reductions where the GPU's shuffles can
/// exchange them (32-bit scalars); nullopt otherwise.
static std::optional<SmallVector<TypedAttr>>
getShuffleIdentities(scf::ParallelOp loop) {
  std::optional<SmallVector<TypedAttr>> identities =
      getReductionIdentities(loop);
  if (!identities || llvm::any_of(loop.getResultTypes(), [](Type type) {
        return type.getIntOrFloatBitWidth() != 32;
      }))
    return std::nullopt;
  return identities;
}

/// The bytes `memref`'s first element is known to be aligned to: what
/// memref.assume_alignment or an allocation states, through subviews whose
/// offset is a constant or a multiple of one; its element's size otherwise.
static uint64_t getKnownAlignment(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  uint64_t element =
      std::max<uint64_t>(1, type.getElementType().getIntOrFloatBitWidth() / 8);
  Operation *def = memref.getDefiningOp();
  // What is stated is of the buffer's start, before the view's offset.
  auto fromStart = [&](uint64_t alignment) -> uint64_t {
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset))
      return element;
    if (offset == 0)
      return std::max(element, alignment);
    return std::max(element, std::gcd(alignment, uint64_t(offset) * element));
  };
  if (auto assume = dyn_cast_if_present<memref::AssumeAlignmentOp>(def))
    return fromStart(assume.getAlignment());
  if (auto alloca = dyn_cast_if_present<memref::AllocaOp>(def))
    return fromStart(alloca.getAlignment().value_or(0));
  auto subview = dyn_cast_if_present<memref::SubViewOp>(def);
  if (!subview || subview.getMixedOffsets().size() != 1)
    return element;
  // The offset's factor known at compile time: the offset itself, or the
  // constant of a product.
  std::optional<int64_t> factor =
      getConstantIntValue(subview.getMixedOffsets()[0]);
  if (!factor)
    if (auto product = subview.getOffsets()[0].getDefiningOp<arith::MulIOp>())
      factor = getConstantIntValue(product.getRhs());
  if (!factor)
    return element;
  uint64_t source = getKnownAlignment(subview.getSource());
  if (*factor == 0)
    return source;
  return std::max<uint64_t>(element,
                            std::gcd(source, uint64_t(*factor) * element));
}

/// The loads of the 1-D `loop`'s body that read its row of consecutive
/// elements (one per iteration: memref.load at the induction variable),
/// and the elements a thread loads at once, `loadBytes` of the narrowest
/// of them, dividing the trip count; 1 where the body does more than
/// compute and load, a row is not known to be aligned to a whole load, or
/// the trip count is not a constant.
static std::pair<SmallVector<memref::LoadOp>, unsigned>
getWideLoads(scf::ParallelOp loop, unsigned loadBytes) {
  std::optional<int64_t> count =
      getParallelTripCount(loop, /*withReductions=*/true);
  if (!count || loadBytes == 0)
    return {{}, 1};
  WalkResult writes = loop.getBody()->walk([](Operation *op) {
    return isArithmetic(op) || isa<memref::LoadOp, scf::ReduceOp>(op)
               ? WalkResult::advance()
               : WalkResult::interrupt();
  });
  if (writes.wasInterrupted())
    return {{}, 1};
  Value iv = loop.getInductionVars()[0];
  llvm::DenseSet<Value> varying = {iv};
  SmallVector<memref::LoadOp> rows;
  uint64_t narrowest = loadBytes;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varying.contains(v); }))
      varying.insert(op.getResults().begin(), op.getResults().end());
    // A row whose view the body makes is read element by element: its
    // run is loaded before the body's copies.
    auto load = dyn_cast<memref::LoadOp>(op);
    if (!load || !isLaneAccess(load, iv, varying) ||
        llvm::any_of(load->getOperands(), [&](Value v) {
          return v != iv && loop->isAncestor(v.getParentBlock()->getParentOp());
        }))
      continue;
    rows.push_back(load);
    narrowest = std::min<uint64_t>(narrowest,
                                   load.getType().getIntOrFloatBitWidth() / 8);
  }
  unsigned lanes = loadBytes / std::max<uint64_t>(narrowest, 1);
  while (lanes > 1 && *count % lanes != 0)
    lanes /= 2;
  for (memref::LoadOp load : rows) {
    uint64_t bytes = lanes * load.getType().getIntOrFloatBitWidth() / 8;
    if (getKnownAlignment(load.getMemRef()) <
        std::min<uint64_t>(bytes, loadBytes))
      return {{}, 1};
  }
  if (rows.empty())
    return {{}, 1};
  return {rows, lanes};
}

namespace {

/// A parallel loop inside another (distributed) one: its thread's own, its
/// iterations in order in an scf.for whose reductions are carried as
/// scalars from the loop's initial values. Where its rows are aligned to
/// whole loads (getWideLoads), a step takes `lanes` iterations: each row's
/// elements are one vector.load, the iterations its lanes in order.
struct SerializeNestedParallel : OpRewritePattern<scf::ParallelOp> {
  SerializeNestedParallel(MLIRContext *ctx, unsigned loadBytes)
      : OpRewritePattern<scf::ParallelOp>(ctx), loadBytes(loadBytes) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    if (loop.getNumLoops() != 1 || !loop->getParentOfType<scf::ParallelOp>())
      return rewriter.notifyMatchFailure(loop, "not one loop inside another");
    std::pair<SmallVector<memref::LoadOp>, unsigned> wideLoads =
        getWideLoads(loop, loadBytes);
    unsigned lanes = wideLoads.second;
    Location loc = loop.getLoc();
    if (lanes == 1) {
      rewriter.replaceOp(
          loop, buildSerialLoop(rewriter, loop, loop.getLowerBound()[0],
                                loop.getStep()[0], loop.getInitVals()));
      return success();
    }
    auto wide = scf::ForOp::create(
        rewriter, loc, loop.getLowerBound()[0], loop.getUpperBound()[0],
        arith::ConstantIndexOp::create(rewriter, loc, lanes),
        loop.getInitVals());
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(wide.getBody());
    Value first = wide.getInductionVar();
    SmallVector<Value> vectors;
    for (memref::LoadOp load : wideLoads.first) {
      SmallVector<Value> indices(load.getIndices());
      indices.back() = first;
      Type element = load.getType();
      uint64_t bytes = lanes * element.getIntOrFloatBitWidth() / 8;
      uint64_t align = std::min(bytes, getKnownAlignment(load.getMemRef()));
      vectors.push_back(vector::LoadOp::create(
          rewriter, loc, VectorType::get({int64_t(lanes)}, element),
          load.getMemRef(), indices, /*nontemporal=*/false,
          llvm::MaybeAlign(align)));
    }
    // The iterations' own indices, where anything but a row reads them.
    Value iv = loop.getInductionVars()[0];
    bool indexed = llvm::any_of(iv.getUsers(), [&](Operation *user) {
      auto load = dyn_cast<memref::LoadOp>(user);
      return !load || !llvm::is_contained(wideLoads.first, load);
    });
    SmallVector<Value> next(wide.getRegionIterArgs());
    for (unsigned j = 0; j < lanes; ++j) {
      IRMapping mapping;
      if (indexed)
        mapping.map(iv, arith::AddIOp::create(
                            rewriter, loc, first,
                            arith::ConstantIndexOp::create(rewriter, loc, j)));
      for (auto [load, row] : llvm::zip_equal(wideLoads.first, vectors))
        mapping.map(load.getResult(),
                    vector::ExtractOp::create(rewriter, loc, row,
                                              ArrayRef<int64_t>{int64_t(j)}));
      next = cloneIteration(rewriter, loop, mapping, next);
    }
    scf::YieldOp::create(rewriter, loc, next);
    rewriter.setInsertionPointAfter(wide);
    rewriter.replaceOp(loop, wide.getResults());
    return success();
  }

  unsigned loadBytes;
};

/// parallel u in [0, U) { row ops; r = parallel i reduce; uses of r } with
/// U leaving threads to spare (a few heads' statistics over a split's
/// tokens): each u is a team of W adjacent threads of a warp (the most,
/// up to a warp, for which U teams fit in the block), the team's workers
/// taking every W-th i from the identity, their shares combined by a
/// butterfly of `gpu.shuffle xor` and the combiner (every worker gets the
/// result), then with the loop's initial value; worker 0 does what follows
/// the inner loop. One barrier, after the outer loop.
struct DistributeNestedReduction : OpRewritePattern<scf::ParallelOp> {
  DistributeNestedReduction(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern<scf::ParallelOp>(ctx, /*benefit=*/2), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp outer,
                                PatternRewriter &rewriter) const override {
    std::optional<LoopAroundReduction> loop = getLoopAroundReduction(outer);
    if (!loop || loop->count == 0)
      return rewriter.notifyMatchFailure(outer, "no reduction inside");
    int64_t units = loop->count;
    scf::ParallelOp inner = loop->inner;
    std::optional<SmallVector<TypedAttr>> identities =
        getShuffleIdentities(inner);
    if (!identities)
      return rewriter.notifyMatchFailure(outer, "no shuffle of its values");
    int64_t team = 1;
    while (team * 2 <= int64_t(info.maxWorkers) &&
           units * team * 2 <= int64_t(info.blockThreads))
      team *= 2;
    if (team == 1)
      return rewriter.notifyMatchFailure(outer, "no threads to spare");
    Location loc = outer.getLoc();
    auto index = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, value);
    };
    // Shuffles need every thread of a warp: the teams fill whole warps,
    // those past the loop's iterations repeating its last one, storing
    // nothing.
    int64_t warp = info.maxWorkers;
    int64_t padded = (units * team + warp - 1) / warp * warp / team;
    Value thread = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value first = arith::DivUIOp::create(rewriter, loc, thread, index(team));
    Value worker = arith::RemUIOp::create(rewriter, loc, thread, index(team));
    auto reduce = cast<scf::ReduceOp>(inner.getBody()->getTerminator());
    scf::ForOp::create(
        rewriter, loc, first, index(padded),
        index(int64_t(info.blockThreads) / team), ValueRange(),
        [&](OpBuilder &b, Location, Value unit, ValueRange) {
          IRMapping mapping;
          mapping.map(outer.getInductionVars()[0],
                      padded == units ? unit
                                      : arith::MinUIOp::create(
                                            b, loc, unit, index(units - 1)));
          Block *body = outer.getBody();
          for (Operation &op :
               llvm::make_range(body->begin(), inner->getIterator()))
            b.clone(op, mapping);
          Value step = mapping.lookupOrDefault(inner.getStep()[0]);
          Value start = arith::AddIOp::create(
              b, loc, mapping.lookupOrDefault(inner.getLowerBound()[0]),
              arith::MulIOp::create(b, loc, worker, step));
          Value stride = arith::MulIOp::create(b, loc, step, index(team));
          SmallVector<Value> shares;
          for (TypedAttr identity : *identities)
            shares.push_back(arith::ConstantOp::create(b, loc, identity));
          scf::ForOp serial =
              buildSerialLoop(b, inner, start, stride, shares, mapping);
          for (auto [k, init] : llvm::enumerate(inner.getInitVals())) {
            Block &combiner = reduce.getReductions()[k].front();
            Value share = serial.getResult(k);
            for (int64_t offset = team / 2; offset >= 1; offset /= 2) {
              auto other = gpu::ShuffleOp::create(
                  b, loc, share, int32_t(offset), int32_t(info.maxWorkers),
                  gpu::ShuffleMode::XOR);
              share = combineByReduction(b, combiner, share,
                                         other.getShuffleResult());
            }
            mapping.map(inner.getResult(k),
                        combineByReduction(
                            b, combiner, mapping.lookupOrDefault(init), share));
          }
          Value lead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             worker, index(0));
          if (padded != units)
            lead = arith::AndIOp::create(
                b, loc, lead,
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, unit,
                                      index(units)));
          scf::IfOp::create(b, loc, lead, [&](OpBuilder &then, Location) {
            for (Operation &op :
                 llvm::make_range(std::next(inner->getIterator()),
                                  body->getTerminator()->getIterator()))
              then.clone(op, mapping);
            scf::YieldOp::create(then, loc);
          });
          scf::YieldOp::create(b, loc);
        });
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.eraseOp(outer);
    return success();
  }

  TargetInfo info;
};

/// parallel c in [0, N) { row ops; r = parallel t reduce { ... row_t[c] ...
/// }; uses of r } where the reduction reads rows at c (a split's value sums:
/// c a channel, t a token) and the rows are known to be aligned to whole
/// loads: parallel u in [0, N / L) with iteration u the L consecutive c
/// from u L, each row's L elements one vector.load (L = loadBytes of the
/// narrowest row's elements), the reduction carrying each of the L
/// iterations' values. A thread then reads a row 16 bytes at a time, and
/// the loop has few enough iterations to leave threads to spare for
/// DistributeNestedReduction's teams.
struct TakeRowRuns : OpRewritePattern<scf::ParallelOp> {
  TakeRowRuns(MLIRContext *ctx, unsigned loadBytes)
      : OpRewritePattern<scf::ParallelOp>(ctx, /*benefit=*/3),
        loadBytes(loadBytes) {}

  LogicalResult matchAndRewrite(scf::ParallelOp outer,
                                PatternRewriter &rewriter) const override {
    std::optional<LoopAroundReduction> loop = getLoopAroundReduction(outer);
    if (!loop || loadBytes == 0)
      return rewriter.notifyMatchFailure(outer, "no reduction inside");
    int64_t count = loop->count;
    scf::ParallelOp inner = loop->inner;
    Value c = outer.getInductionVars()[0];
    SmallVector<memref::LoadOp> rows = getRowLoads(inner, c);
    if (rows.empty())
      return rewriter.notifyMatchFailure(outer, "reads no row at c");
    uint64_t narrowest = loadBytes;
    for (memref::LoadOp load : rows)
      narrowest = std::min<uint64_t>(
          narrowest, load.getType().getIntOrFloatBitWidth() / 8);
    int64_t lanes = loadBytes / std::max<uint64_t>(narrowest, 1);
    if (lanes < 2 || count % lanes != 0 || count / lanes < 2)
      return rewriter.notifyMatchFailure(outer, "no whole runs");
    for (memref::LoadOp load : rows)
      if (getKnownAlignment(load.getMemRef()) <
          std::min<uint64_t>(lanes * load.getType().getIntOrFloatBitWidth() / 8,
                             loadBytes))
        return rewriter.notifyMatchFailure(outer, "rows of unknown alignment");
    for (Value bound : llvm::concat<Value>(
             inner.getLowerBound(), inner.getUpperBound(), inner.getStep()))
      if (dependsOn(bound, c))
        return rewriter.notifyMatchFailure(outer, "bounds vary with c");
    Location loc = outer.getLoc();
    auto index = [&](OpBuilder &b, int64_t value) -> Value {
      return arith::ConstantIndexOp::create(b, loc, value);
    };
    scf::ParallelOp::create(
        rewriter, loc, ValueRange{index(rewriter, 0)},
        ValueRange{index(rewriter, count / lanes)},
        ValueRange{index(rewriter, 1)},
        [&](OpBuilder &b, Location, ValueRange ivs) {
          Value first = arith::MulIOp::create(b, loc, ivs[0], index(b, lanes));
          SmallVector<IRMapping> lane(lanes);
          for (int64_t j = 0; j < lanes; ++j)
            lane[j].map(c, arith::AddIOp::create(b, loc, first, index(b, j)));
          Block *body = outer.getBody();
          llvm::DenseSet<Value> varying = {c};
          for (Operation &op :
               llvm::make_range(body->begin(), inner->getIterator()))
            cloneForLanes(b, op, lane, varying);
          buildRunReduction(b, inner, rows, first, lane, varying);
          for (Operation &op :
               llvm::make_range(std::next(inner->getIterator()),
                                body->getTerminator()->getIterator()))
            cloneForLanes(b, op, lane, varying);
        });
    rewriter.eraseOp(outer);
    return success();
  }

  /// The loads of `inner`'s body at `c` in a unit-stride last dimension,
  /// their memref and other indices not depending on `c`.
  static SmallVector<memref::LoadOp> getRowLoads(scf::ParallelOp inner,
                                                 Value c) {
    SmallVector<memref::LoadOp> rows;
    for (Operation &op : inner.getBody()->without_terminator()) {
      auto load = dyn_cast<memref::LoadOp>(op);
      if (!load || load.getIndices().empty() || load.getIndices().back() != c)
        continue;
      if (!isLaneAccess(load, c, {c}) || dependsOn(load.getMemRef(), c) ||
          llvm::any_of(load.getIndices().drop_back(),
                       [&](Value i) { return dependsOn(i, c); }))
        return {};
      rows.push_back(load);
    }
    return rows;
  }

  /// Clones `op` at `b` once for every lane's mapping where it reads a
  /// value of `varying` (which then holds its results too), once for all
  /// of them otherwise.
  static void cloneForLanes(OpBuilder &b, Operation &op,
                            MutableArrayRef<IRMapping> lane,
                            llvm::DenseSet<Value> &varying) {
    if (!usesAny(&op, varying)) {
      Operation *clone = b.clone(op, lane[0]);
      for (IRMapping &mapping : lane.drop_front())
        mapping.map(op.getResults(), clone->getResults());
      return;
    }
    for (IRMapping &mapping : lane)
      b.clone(op, mapping);
    varying.insert(op.result_begin(), op.result_end());
  }

  /// Whether `value` is computed from `c` within the ops that define it.
  static bool dependsOn(Value value, Value c) {
    if (value == c)
      return true;
    Operation *def = value.getDefiningOp();
    return def && llvm::any_of(def->getOperands(),
                               [&](Value v) { return dependsOn(v, c); });
  }

  /// `inner` for the `lanes` iterations whose mappings are `lane`: each
  /// row's run one vector.load at `first`, each reduced value once a lane,
  /// and each lane's results mapped to the new loop's.
  static void buildRunReduction(OpBuilder &b, scf::ParallelOp inner,
                                ArrayRef<memref::LoadOp> rows, Value first,
                                MutableArrayRef<IRMapping> lane,
                                llvm::DenseSet<Value> &varying) {
    Location loc = inner.getLoc();
    auto reduce = cast<scf::ReduceOp>(inner.getBody()->getTerminator());
    SmallVector<Value> inits;
    for (IRMapping &mapping : lane)
      for (Value init : inner.getInitVals())
        inits.push_back(mapping.lookupOrDefault(init));
    auto loop = scf::ParallelOp::create(
        b, loc, lane[0].lookupOrDefault(inner.getLowerBound()[0]),
        lane[0].lookupOrDefault(inner.getUpperBound()[0]),
        lane[0].lookupOrDefault(inner.getStep()[0]), inits,
        [&](OpBuilder &b, Location, ValueRange ivs, ValueRange) {
          for (IRMapping &mapping : lane)
            mapping.map(inner.getInductionVars()[0], ivs[0]);
          for (Operation &op : inner.getBody()->without_terminator()) {
            auto load = dyn_cast<memref::LoadOp>(op);
            if (!load || !llvm::is_contained(rows, load)) {
              cloneForLanes(b, op, lane, varying);
              continue;
            }
            varying.insert(load.getResult());
            SmallVector<Value> indices =
                llvm::map_to_vector(load.getIndices(), [&](Value i) {
                  return lane[0].lookupOrDefault(i);
                });
            indices.back() = first;
            Value memref = lane[0].lookupOrDefault(load.getMemRef());
            Type element = load.getType();
            uint64_t bytes = lane.size() * element.getIntOrFloatBitWidth() / 8;
            Value run = vector::LoadOp::create(
                b, loc, VectorType::get({int64_t(lane.size())}, element),
                memref, indices, /*nontemporal=*/false,
                llvm::MaybeAlign(std::min(bytes, getKnownAlignment(memref))));
            for (auto [j, mapping] : llvm::enumerate(lane))
              mapping.map(load.getResult(),
                          vector::ExtractOp::create(
                              b, loc, run, ArrayRef<int64_t>{int64_t(j)}));
          }
          SmallVector<Value> values;
          for (IRMapping &mapping : lane)
            for (Value value : reduce.getOperands())
              values.push_back(mapping.lookupOrDefault(value));
          auto combined = scf::ReduceOp::create(b, loc, values);
          for (auto [k, region] : llvm::enumerate(combined.getReductions())) {
            Block &block = region.front();
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToEnd(&block);
            Block &combiner =
                reduce.getReductions()[k % reduce.getNumOperands()].front();
            scf::ReduceReturnOp::create(
                b, loc,
                combineByReduction(b, combiner, block.getArgument(0),
                                   block.getArgument(1)));
          }
        });
    unsigned perLane = inner.getNumResults();
    for (auto [j, mapping] : llvm::enumerate(lane))
      for (unsigned k = 0; k < perLane; ++k)
        mapping.map(inner.getResult(k), loop.getResult(j * perLane + k));
    varying.insert(inner.result_begin(), inner.result_end());
  }

  unsigned loadBytes;
};

} // namespace

void kvq::distributeNestedLoops(Operation *root, const TargetInfo &info) {
  MLIRContext *ctx = root->getContext();
  RewritePatternSet runs(ctx);
  runs.add<TakeRowRuns>(ctx, info.loadBytes);
  walkAndApplyPatterns(root, std::move(runs));
  RewritePatternSet teams(ctx);
  teams.add<DistributeNestedReduction>(ctx, info);
  walkAndApplyPatterns(root, std::move(teams));
  RewritePatternSet serialize(ctx);
  serialize.add<SerializeNestedParallel>(ctx, info.loadBytes);
  walkAndApplyPatterns(root, std::move(serialize));
}
