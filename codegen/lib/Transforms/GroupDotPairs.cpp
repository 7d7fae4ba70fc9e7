//===- GroupDotPairs.cpp - a row's group dots on integer pair dots --------===//
//
// Where the target adds products of 16-bit integers in pairs (cpu_dot:
// `vpdpwssd`), a loop summing all the group dots of a row inside a loop
// over the rows, each tile the group's part of a row the outer loop reads
// unchanged (a span=channels key token's groups against each head's
// query), runs as the emitted span=channels key form computes
// (docs/Numerics.md, "Attention on integer dots"; ChannelPairs.h): before
// the loop over the rows, each head's whole row rounded to i16 once and
// its groups' sums; per row, its groups' code words one vector load, each
// vector of code pairs one byte shuffle, shift and mask (unpackHalves), one
// pair dot a head and vector, and the heads' i32 sums folded by group,
// scaled by the slopes and offset by the groups' sums (ChannelPairScores).
// The carried form multiplied each group's reconstructed elements by each
// head's tile in f32, two products a lane.
//
//===----------------------------------------------------------------------===//

#include "ExactIndex.h"
#include "GroupDotForms.h"
#include "ParallelForms.h"

#include "kvq/Codegen/ChannelPairs.h"
#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/IntegerFactors.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace kvq;

namespace {

/// The facts the form reads off a loop summing a row's group dots.
struct PairRow {
  GroupDotOp dot;
  /// The loop over the rows around it.
  LoopLikeOpInterface rows;
  int64_t groups, group;
  unsigned bits;
  /// The load of a group's code words, `words` of them, group g's at the
  /// first's index + g * words.
  vector::LoadOp codeWords;
  int64_t words;
  /// Each head's row, whose group g the tile reads at g * group.
  SmallVector<Value> tileRows;
};

struct GroupDotsOnPairs : OpRewritePattern<scf::ParallelOp> {
  GroupDotsOnPairs(MLIRContext *ctx, const TargetInfo &info, IntegerDots dots)
      : OpRewritePattern(ctx), info(info), dots(dots) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    std::optional<PairRow> row = match(loop);
    if (!row)
      return rewriter.notifyMatchFailure(loop, "no row of group dots");
    Location loc = row->dot.getLoc();
    KernelBuilder kb(rewriter, loc);
    ChannelPairs pairs(info.vectorLanes, row->groups, row->group);
    Block *body = loop.getBody();
    GroupDotOp dot = row->dot;
    unsigned heads = dot.getDots().size();

    // Before the loop over the rows: each head's row rounded, and its
    // groups' sums.
    rewriter.setInsertionPoint(row->rows);
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    auto rowType =
        VectorType::get({row->groups * row->group}, rewriter.getF32Type());
    SmallVector<Value> queryPairs, scales;
    for (unsigned r = 0; r < heads; ++r) {
      Value whole = vector::LoadOp::create(rewriter, loc, rowType,
                                           row->tileRows[r], zero);
      queryPairs.append(pairs.roundQuery(kb, whole, scales.emplace_back()));
    }
    ChannelPairScores scoring(kb, pairs, scales,
                              acrossGroups(kb, dot.getSums(), body, *row));

    // In the loop's place: the row's code words of every group, its groups'
    // parameters, and the heads' dots.
    rewriter.setInsertionPoint(loop);
    SmallVector<Value> params = acrossGroups(
        kb, ValueRange{dot.getSlope(), dot.getOffset()}, body, *row);
    vector::LoadOp load = row->codeWords;
    Value first = cloneAtGroup(rewriter, load.getIndices(), body, 0).front();
    Value words = vector::LoadOp::create(
        rewriter, loc,
        VectorType::get({row->groups * row->words}, rewriter.getI32Type()),
        load.getBase(), first);
    Value bytes = vector::BitCastOp::create(
        rewriter, loc,
        VectorType::get({4 * row->groups * row->words}, rewriter.getI8Type()),
        words);
    SmallVector<Value> sums(heads, kb.splat(kb.i32(0), pairs.lanes));
    for (unsigned v = 0; v < pairs.vectors; ++v) {
      Value codes = unpackHalves(kb, bytes, row->bits,
                                 pairs.getHalfBits(v, row->words, row->bits));
      for (unsigned r = 0; r < heads; ++r)
        sums[r] =
            dots.dot(kb, sums[r], codes, queryPairs[r * pairs.vectors + v]);
    }
    SmallVector<Value> results;
    ArrayRef<ChannelPairScores::HeadChunk> chunks = scoring.getChunks();
    for (auto [chunk, scores] :
         llvm::zip(chunks, scoring.score(kb, sums, params[0], params[1])))
      for (unsigned i = 0; i < chunk.count; ++i) {
        Value score = vector::ExtractOp::create(
            rewriter, loc, scores,
            ArrayRef<int64_t>{int64_t(i * (pairs.lanes / chunk.count))});
        Value init = loop.getInitVals()[chunk.first + i];
        // A sum from +0 (parallelSum's) is the dots' sum.
        results.push_back(matchPattern(init, m_PosZeroFloat())
                              ? score
                              : kb.fadd(score, init));
      }
    rewriter.replaceOp(loop, results);
    return success();
  }

  /// Each of `values` of `body` at every one of `row`'s groups, a vector of
  /// them (of one where a row is one group); a group's ops cloned once.
  static SmallVector<Value> acrossGroups(KernelBuilder &kb, ValueRange values,
                                         Block *body, const PairRow &row) {
    SmallVector<SmallVector<Value>> elements(values.size());
    for (int64_t g = 0; g < row.groups; ++g)
      for (auto [i, value] :
           llvm::enumerate(cloneAtGroup(kb.builder(), values, body, g)))
        elements[i].push_back(value);
    return llvm::map_to_vector(llvm::zip(values, elements), [&](auto pair) {
      auto [value, groupValues] = pair;
      return Value(vector::FromElementsOp::create(
          kb.builder(), kb.getLoc(),
          VectorType::get({row.groups}, value.getType()), groupValues));
    });
  }

  std::optional<PairRow> match(scf::ParallelOp loop) const {
    GroupDotOp dot = getSummedGroupDot(loop);
    auto rows = dyn_cast_or_null<LoopLikeOpInterface>(loop->getParentOp());
    std::optional<int64_t> groups =
        getParallelTripCount(loop, /*withReductions=*/true);
    if (!dot || !rows || !groups)
      return std::nullopt;
    PairRow row{dot, rows, *groups, 0, 0, {}, 0, {}};
    auto unpack = dot.getCodes().getDefiningOp<UnpackOp>();
    if (!unpack || unpack.getOffset() != 0 ||
        unpack.getStride() != unpack.getBits())
      return std::nullopt;
    row.bits = unpack.getBits();
    row.group = cast<VectorType>(unpack.getType()).getNumElements();
    row.codeWords = unpack.getWords().getDefiningOp<vector::LoadOp>();
    if (!row.codeWords || row.group * row.bits % 32 != 0 ||
        !ChannelPairs::fits(info.vectorLanes, row.groups, row.group) ||
        !dots.sumsFit(row.group, row.bits))
      return std::nullopt;
    row.words = row.codeWords.getVectorType().getNumElements();
    Block *body = loop.getBody();
    Value g = loop.getInductionVars()[0];
    if (!getGroupStrided(row.codeWords, g, row.words, row.groups) ||
        !loop.isDefinedOutsideOfLoop(row.codeWords.getBase()) ||
        !isHoistable(row.codeWords.getIndices()[0], body, loop) ||
        !isHoistable(dot.getSlope(), body, loop) ||
        !isHoistable(dot.getOffset(), body, loop))
      return std::nullopt;
    // The tiles: each head's whole row, group g at g * group, which the
    // loop over the rows reads and does not write, with their sums.
    auto tileType =
        VectorType::get({row.group}, Float32Type::get(dot.getContext()));
    SmallVector<Value> roots;
    for (auto [tile, sum] : llvm::zip(dot.getTiles(), dot.getSums())) {
      auto load = tile.getDefiningOp<vector::LoadOp>();
      std::optional<ExactIndex> first =
          load ? getGroupStrided(load, g, row.group, row.groups) : std::nullopt;
      if (!load || load.getVectorType() != tileType || !first ||
          !first->isConstant() || first->offset != 0 ||
          !rows.isDefinedOutsideOfLoop(load.getBase()) ||
          !isHoistable(sum, body, rows))
        return std::nullopt;
      auto type = cast<MemRefType>(load.getBase().getType());
      if (type.getRank() != 1 || type.getShape()[0] != row.groups * row.group)
        return std::nullopt;
      row.tileRows.push_back(load.getBase());
      roots.push_back(getViewRoot(load.getBase()));
      for (Operation *op : getSliceInBlock(body, sum))
        for (Value operand : op->getOperands())
          if (isa<MemRefType>(operand.getType()))
            roots.push_back(getViewRoot(operand));
    }
    if (writesAny(rows, roots))
      return std::nullopt;
    return row;
  }

  /// The index of group 0 where `load`, of a 1-D unit-stride memref, reads
  /// group g of `groups` at it + g * `stride`; none otherwise.
  static std::optional<ExactIndex> getGroupStrided(vector::LoadOp load, Value g,
                                                   int64_t stride,
                                                   int64_t groups) {
    if (load.getIndices().size() != 1 ||
        !load.getMemRefType().isLastDimUnitStride())
      return std::nullopt;
    SmallVector<ExactLane> lanes;
    for (int64_t i = 0; i < groups; ++i)
      lanes.push_back({{{g, ExactIndex{0, i, {}}}}, {g}});
    return getSpacedIndex(load.getIndices()[0], lanes, stride);
  }

  TargetInfo info;
  IntegerDots dots;
};

} // namespace

void kvq::populatePairGroupDotPatterns(RewritePatternSet &patterns,
                                       const TargetInfo &info) {
  std::optional<IntegerDots> dots = IntegerDots::get(info.dot);
  if (dots && dots->k == 2 && info.vectorLanes == 16)
    patterns.add<GroupDotsOnPairs>(patterns.getContext(), info, *dots);
}
