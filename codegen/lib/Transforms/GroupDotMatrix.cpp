//===- GroupDotMatrix.cpp - rows of group dots on the warp's matrix unit --===//
//
// Where the target has a warp's matrix unit (#kvq.mma: m16n8k16, f16
// operands, f32 sums), a parallel loop over rows whose iteration sums all
// the group dots of its row and stores each head's sum (a split's
// span=channels key tokens against the heads' queries; a span=tokens value
// slice's channels against the heads' weights, a run-time number of token
// groups) runs as products of matrices, as the emitted matrix forms do
// (AttendMatrix.cpp): a warp takes 16 rows at a time, the rows A's rows and
// the heads B's columns, so that a cached element costs its unpacking once
// instead of one multiply-add a head.
//
// A dot's sum is the same in any order of a group's elements, so thread t
// of a quad (lane % 4) holds A's and B's columns 2t, 2t + 1, 2t + 8 and
// 2t + 9 of each of a group's s steps for the group's elements [4st,
// 4s(t + 1)): its codes of a row are one run of 4sb bits, a funnel shift of
// two words. The codes are exact in f16 and each tile element x is split
// into two f16 halves, hi = f16(x) and lo = f16(x - hi), a product each
// (the emitted matrix forms' split halves, docs/Numerics.md); a group's
// sums are then scaled by its slope and offset by its offset times the
// tile's sum, in f32.
//
// The loop becomes one iteration a thread of the block (the GPU's
// distribution gives thread i iteration i), around a loop over the warp's
// tiles of rows, so that every lane of a warp runs the same tiles, as
// mma.sync needs. B's columns and their sums are read once a thread where
// a row's groups are a constant number, else at each group.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"
#include "ParallelForms.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace kvq;

namespace {

constexpr int64_t kRows = 16, kHeads = 8, kStep = 16, kWarp = 32;

/// The facts the form reads off a loop over rows summing each row's group
/// dots.
struct MatrixRows {
  GroupDotOp dot;
  /// The loop summing a row's group dots, inside the loop over the rows.
  scf::ParallelOp groups;
  /// The groups a row, where a constant.
  std::optional<int64_t> numGroups;
  int64_t group, bits, words;
  vector::LoadOp codeWords;
  /// The memref every head's tile is a load of, or of a view of, and each
  /// head's view's offset on it (0 where the tile is a load of it).
  Value tileSource;
  SmallVector<int64_t> tileOffsets;
  /// The store of each head's sum, in the loop over the rows, and where
  /// the sum is added to what the store's place holds, `added`.
  SmallVector<memref::StoreOp> stores;
  bool added = false;

  /// The matrix steps of a group, and each thread's codes of a row.
  int64_t getSteps() const { return group / kStep; }
  int64_t getThreadCodes() const { return 4 * getSteps(); }
  int64_t getHeads() { return dot.getDots().size(); }
  int64_t getHeadTiles() { return llvm::divideCeil(getHeads(), kHeads); }
  /// The group loop's values of a row's group: the codes' memref and index,
  /// the slope and the offset.
  SmallVector<Value> getGroupValues() {
    return {codeWords.getBase(), codeWords.getIndices()[0], dot.getSlope(),
            dot.getOffset()};
  }
  /// The indices of the heads' tiles in the group loop.
  SmallVector<Value> getTileIndices() {
    return llvm::map_to_vector(dot.getTiles(), [](Value tile) {
      return Value(tile.getDefiningOp<vector::LoadOp>().getIndices()[0]);
    });
  }
  /// The values of the row loop's body that a row's group's values, the
  /// groups' count and the sums' stores read.
  SmallVector<Value> getRowValues() {
    SmallVector<Value> values = getGroupValues();
    values.push_back(groups.getUpperBound()[0]);
    for (Operation *op : getSliceInBlock(groups.getBody(), getGroupValues()))
      llvm::append_range(values, op->getOperands());
    for (memref::StoreOp store : stores) {
      values.push_back(store.getMemRef());
      llvm::append_range(values, store.getIndices());
    }
    return values;
  }
};

/// Whether `op` only computes or reads (a row's addresses and views).
bool computesOrReads(Operation *op) {
  return op->getNumRegions() == 0 &&
         (isPure(op) || isa<memref::LoadOp, vector::LoadOp>(op));
}

/// A thread's warp and its place in the matrix fragments.
struct Lane {
  Value warp, quadRow, quadColumn;
};

/// B's columns at one group and the sums of the thread's C columns.
struct GroupColumns {
  SmallVector<Value> columns, sums;
};

struct GroupDotsOnMatrix : OpRewritePattern<scf::ParallelOp> {
  GroupDotsOnMatrix(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern(ctx), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp rows,
                                PatternRewriter &rewriter) const override {
    std::optional<MatrixRows> m = match(rows);
    if (!m)
      return rewriter.notifyMatchFailure(rows, "no rows of group dots");
    ProgramBuilder pb(rewriter, m->dot.getLoc());
    pb.setReassociate(true);
    rewriter.setInsertionPoint(rows);
    scf::ParallelOp::create(rewriter, rows.getLoc(), ValueRange{pb.index(0)},
                            ValueRange{pb.index(info.blockThreads)},
                            ValueRange{pb.index(1)},
                            [&](OpBuilder &, Location, ValueRange ivs) {
                              buildThread(pb, rows, *m, ivs[0]);
                            });
    rewriter.eraseOp(rows);
    return success();
  }

  /// Thread `thread`'s share: where a row's groups are a constant number,
  /// its columns of B and their sums once, then a loop over the warp's
  /// tiles of rows; where they are a run-time number and the warps share
  /// a constant number of rows evenly, the warp's tiles side by side, so
  /// that B is read once a group for all of them; else a loop over the
  /// tiles, B read at each group of each.
  void buildThread(ProgramBuilder &pb, scf::ParallelOp rows, MatrixRows &m,
                   Value thread) const {
    Value lane = pb.remU(thread, pb.index(kWarp));
    Lane at{pb.divU(thread, pb.index(kWarp)), pb.divU(lane, pb.index(4)),
            pb.remU(lane, pb.index(4))};
    SmallVector<GroupColumns> columns;
    for (int64_t g = 0; g < m.numGroups.value_or(0); ++g)
      columns.push_back(loadGroupColumns(pb, m, pb.index(g), at));
    int64_t warps = info.blockThreads / kWarp;
    Value count = rows.getUpperBound()[0];
    std::optional<int64_t> constant = getConstantIntValue(count);
    if (!m.numGroups && constant && *constant > 0 &&
        *constant % (kRows * warps) == 0) {
      SmallVector<Value> tiles;
      for (int64_t i = 0; i < *constant / (kRows * warps); ++i)
        tiles.push_back(pb.add(at.warp, pb.index(i * warps)));
      return buildTiles(pb, rows, m, tiles, at, columns);
    }
    Value tiles = pb.divU(pb.add(count, pb.index(kRows - 1)), pb.index(kRows));
    auto loop = scf::ForOp::create(pb.builder(), pb.getLoc(), at.warp, tiles,
                                   pb.index(warps));
    OpBuilder::InsertionGuard guard(pb.builder());
    pb.builder().setInsertionPoint(loop.getBody()->getTerminator());
    buildTiles(pb, rows, m, loop.getInductionVar(), at, columns);
  }

  /// A warp's tile's rows, quadRow and quadRow + 8 of it, and the row
  /// loop's values at each (a row past the last reads the last row's).
  struct TileRows {
    Value index[2];
    IRMapping mapping[2];
  };

  static TileRows cloneTileRows(ProgramBuilder &pb, scf::ParallelOp rows,
                                MatrixRows &m, Value tile, Lane &at) {
    Value last = pb.sub(rows.getUpperBound()[0], pb.index(1));
    Value row0 = pb.add(pb.mul(tile, pb.index(kRows)), at.quadRow);
    TileRows out;
    out.index[0] = row0;
    out.index[1] = pb.add(row0, pb.index(kRows / 2));
    for (int k = 0; k < 2; ++k) {
      out.mapping[k].map(rows.getInductionVars()[0],
                         pb.minU(out.index[k], last));
      for (Operation *op : getSliceInBlock(rows.getBody(), m.getRowValues()))
        pb.builder().clone(*op, out.mapping[k]);
    }
    return out;
  }

  /// The warp's tiles `tiles`: each group's codes a product with B
  /// (`columns`, or B loaded at each group where a row's groups are a
  /// run-time number), scaled and offset, then the stores of the thread's
  /// C elements.
  static void buildTiles(ProgramBuilder &pb, scf::ParallelOp rows,
                         MatrixRows &m, ValueRange tiles, Lane &at,
                         MutableArrayRef<GroupColumns> columns) {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    SmallVector<TileRows> tileRows;
    for (Value tile : tiles)
      tileRows.push_back(cloneTileRows(pb, rows, m, tile, at));
    int64_t sums = m.getHeadTiles() * 4;
    SmallVector<Value> acc(tiles.size() * sums, pb.f32(0));
    auto addTiles = [&](Value g, GroupColumns &here, ValueRange from) {
      SmallVector<Value> out;
      for (auto [i, rowsOf] : llvm::enumerate(tileRows))
        llvm::append_range(out, addGroup(pb, m, g, rowsOf.mapping, at, here,
                                         from.slice(i * sums, sums)));
      return out;
    };
    if (m.numGroups) {
      for (int64_t g = 0; g < *m.numGroups; ++g)
        acc = addTiles(pb.index(g), columns[g], acc);
    } else {
      Value groups =
          tileRows[0].mapping[0].lookupOrDefault(m.groups.getUpperBound()[0]);
      auto loop = scf::ForOp::create(
          b, loc, pb.index(0), groups, pb.index(1), acc,
          [&](OpBuilder &, Location, Value g, ValueRange carried) {
            GroupColumns here = loadGroupColumns(pb, m, g, at);
            scf::YieldOp::create(b, loc, addTiles(g, here, carried));
          });
      acc = loop.getResults();
    }
    for (auto [i, rowsOf] : llvm::enumerate(tileRows))
      storeSums(pb, m, rowsOf.mapping, rowsOf.index, rows.getUpperBound()[0],
                at.quadColumn, ArrayRef<Value>(acc).slice(i * sums, sums));
    // The masked stores part the warp's lanes (a branch each in PTX); the
    // next tile's products need them all again.
    NVVM::SyncWarpOp::create(b, loc, pb.i32(-1));
  }

  /// `acc` plus group `g`'s products of the thread's rows' codes with
  /// `columns`, each row's scaled by its slope and offset by its offset
  /// times the heads' sums.
  static SmallVector<Value> addGroup(ProgramBuilder &pb, MatrixRows &m, Value g,
                                     IRMapping (&rowMapping)[2], Lane &at,
                                     GroupColumns &columns, ValueRange acc) {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    SmallVector<Value> codes[2];
    Value slope[2], offset[2];
    for (int k = 0; k < 2; ++k) {
      IRMapping mapping = rowMapping[k];
      SmallVector<Value> values =
          cloneAt(b, m.getGroupValues(), m.groups.getBody(), g, mapping);
      codes[k] = loadThreadCodes(pb, m, values[0], values[1], at.quadColumn);
      slope[k] = values[2];
      offset[k] = values[3];
    }
    int64_t steps = m.getSteps();
    SmallVector<Value> a;
    for (int64_t s = 0; s < steps; ++s)
      a.push_back(vector::FromElementsOp::create(
          b, loc, VectorType::get({4, 2}, b.getF16Type()),
          ValueRange{codes[0][4 * s], codes[0][4 * s + 1], codes[1][4 * s],
                     codes[1][4 * s + 1], codes[0][4 * s + 2],
                     codes[0][4 * s + 3], codes[1][4 * s + 2],
                     codes[1][4 * s + 3]}));
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> out(acc.begin(), acc.end());
    for (int64_t n = 0; n < m.getHeadTiles(); ++n) {
      Value d = arith::ConstantOp::create(
          b, loc, accType, DenseElementsAttr::get(accType, 0.0f));
      for (int64_t s = 0; s < steps; ++s)
        for (int64_t part = 0; part < 2; ++part)
          d = nvgpu::MmaSyncOp::create(
              b, loc, a[s], columns.columns[(n * steps + s) * 2 + part], d,
              ArrayRef<int64_t>{kRows, kHeads, kStep});
      for (int k = 0; k < 2; ++k)
        for (int64_t half = 0; half < 2; ++half) {
          Value raw =
              vector::ExtractOp::create(b, loc, d, ArrayRef<int64_t>{k, half});
          Value &sum = out[n * 4 + k * 2 + half];
          sum = pb.fadd(sum, foldAffineDot(pb, AffineTerms{slope[k], offset[k]},
                                           raw, columns.sums[n * 2 + half]));
        }
    }
    return out;
  }

  /// The thread's codes of a row's group (its words at `first` of `base`),
  /// as f16: its run of 4sb bits from bit 4sb * quadColumn of the group's
  /// words, a funnel shift of the word it starts in and the next (the
  /// group's last where it ends there).
  static SmallVector<Value> loadThreadCodes(ProgramBuilder &pb, MatrixRows &m,
                                            Value base, Value first,
                                            Value quadColumn) {
    int64_t runBits = m.getThreadCodes() * m.bits;
    Value bit = pb.mul(quadColumn, pb.index(runBits));
    Value word = pb.divU(bit, pb.index(32));
    Value next = pb.minU(pb.add(word, pb.index(1)), pb.index(m.words - 1));
    Value lo = pb.loadElement(base, pb.add(first, word));
    Value hi = pb.loadElement(base, pb.add(first, next));
    Value shift = pb.indexToI32(pb.remU(bit, pb.index(32)));
    Value run = pb.callIntrinsic("llvm.fshr", {hi, lo, shift});
    SmallVector<Value> codes;
    Value mask = pb.i32((1 << m.bits) - 1);
    for (int64_t j = 0; j < m.getThreadCodes(); ++j) {
      Value code = pb.bitAnd(pb.shrU(run, pb.i32(j * m.bits)), mask);
      codes.push_back(arith::UIToFPOp::create(pb.builder(), pb.getLoc(),
                                              pb.builder().getF16Type(), code));
    }
    return codes;
  }

  /// B's columns at group `g`: for each tile of 8 heads, the tile elements
  /// of head n * 8 + quadRow (zero past the last head) at the thread's
  /// channels [4s * quadColumn, 4s * (quadColumn + 1)) of the group, each
  /// split into two f16 halves, hi = f16(x) and lo = f16(x - hi): two f16x2
  /// registers a step and half, the high ones first. And the sums of the
  /// heads of the thread's C columns, n * 8 + 2 * quadColumn + {0, 1}.
  static GroupColumns loadGroupColumns(ProgramBuilder &pb, MatrixRows &m,
                                       Value g, Lane &at) {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    Block *body = m.groups.getBody();
    IRMapping mapping;
    SmallVector<Value> sums = cloneAt(b, m.dot.getSums(), body, g, mapping);
    SmallVector<Value> starts;
    for (auto [offset, index] : llvm::zip(
             m.tileOffsets, cloneAt(b, m.getTileIndices(), body, g, mapping)))
      starts.push_back(pb.add(pb.index(offset), index));
    int64_t heads = m.getHeads();
    Value zero = arith::ConstantOp::create(b, loc, b.getF16FloatAttr(0));
    auto type = VectorType::get({2, 2}, b.getF16Type());
    GroupColumns out;
    for (int64_t n = 0; n < m.getHeadTiles(); ++n) {
      Value head = pb.add(pb.index(n * kHeads), at.quadRow);
      Value valid = pb.ult(head, pb.index(heads));
      Value start = starts[n * kHeads];
      for (int64_t h = n * kHeads + 1; h < std::min(heads, (n + 1) * kHeads);
           ++h)
        start = pb.select(pb.eq(head, pb.index(h)), starts[h], start);
      start =
          pb.add(start, pb.mul(at.quadColumn, pb.index(m.getThreadCodes())));
      SmallVector<Value> high, low;
      for (int64_t j = 0; j < m.getThreadCodes(); ++j) {
        Value x = pb.loadElementAsF32(m.tileSource, pb.add(start, pb.index(j)));
        Value hi = arith::TruncFOp::create(b, loc, b.getF16Type(), x);
        Value lo = arith::TruncFOp::create(b, loc, b.getF16Type(),
                                           pb.fsub(x, pb.asF32(hi)));
        high.push_back(pb.select(valid, hi, zero));
        low.push_back(pb.select(valid, lo, zero));
      }
      for (int64_t s = 0; s < m.getSteps(); ++s)
        for (ArrayRef<Value> halves :
             {ArrayRef<Value>(high), ArrayRef<Value>(low)})
          out.columns.push_back(vector::FromElementsOp::create(
              b, loc, type, halves.slice(4 * s, 4)));
      for (int64_t half = 0; half < 2; ++half) {
        Value sum = pb.f32(0);
        for (int64_t t = 0; t < 4; ++t)
          if (int64_t h = n * kHeads + 2 * t + half; h < heads)
            sum = pb.select(pb.eq(at.quadColumn, pb.index(t)), sums[h], sum);
        out.sums.push_back(sum);
      }
    }
    return out;
  }

  /// Stores the thread's C elements: head n * 8 + 2 * quadColumn + half of
  /// row k, where the head and the row are (added to what the place holds
  /// where the loop did so). The loads and stores are masked, not
  /// branches, so that the loop stays one block (kvq-pipeline-loads).
  static void storeSums(ProgramBuilder &pb, MatrixRows &m,
                        IRMapping (&rowMapping)[2], Value (&rowIndex)[2],
                        Value count, Value quadColumn, ValueRange acc) {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    for (auto [head, store] : llvm::enumerate(m.stores)) {
      int64_t n = head / kHeads, column = head % kHeads;
      Value mine = pb.eq(quadColumn, pb.index(column / 2));
      for (int k = 0; k < 2; ++k) {
        Value taken =
            arith::AndIOp::create(b, loc, mine, pb.ult(rowIndex[k], count));
        Value value = acc[n * 4 + k * 2 + column % 2];
        SmallVector<Value> indices =
            llvm::map_to_vector(store.getIndices(), [&](Value index) {
              return rowMapping[k].lookupOrDefault(index);
            });
        Value memref = rowMapping[k].lookupOrDefault(store.getMemRef());
        auto type = VectorType::get({1}, value.getType());
        Value mask = vector::BroadcastOp::create(
            b, loc, VectorType::get({1}, b.getI1Type()), taken);
        Value sum = vector::BroadcastOp::create(b, loc, type, value);
        if (m.added)
          sum = pb.fadd(
              vector::MaskedLoadOp::create(
                  b, loc, type, memref, indices, mask,
                  arith::ConstantOp::create(
                      b, loc, type, DenseElementsAttr::get(type, 0.0f))),
              sum);
        vector::MaskedStoreOp::create(b, loc, memref, indices, mask, sum);
      }
    }
  }

  std::optional<MatrixRows> match(scf::ParallelOp rows) const {
    // Outermost, so that the GPU's distribution gives thread i the new
    // loop's iteration i (a loop inside another is spread otherwise).
    if (rows.getNumLoops() != 1 || rows.getNumResults() != 0 ||
        rows->getParentOfType<scf::ParallelOp>() ||
        !matchPattern(rows.getLowerBound()[0], m_Zero()) ||
        !matchPattern(rows.getStep()[0], m_One()))
      return std::nullopt;
    Block *body = rows.getBody();
    scf::ParallelOp groups;
    for (Operation &op : body->without_terminator()) {
      auto loop = dyn_cast<scf::ParallelOp>(&op);
      if (loop && !groups)
        groups = loop;
      else if (!computesOrReads(&op) &&
               !isa<memref::StoreOp, memref::PrefetchOp>(op))
        return std::nullopt;
    }
    GroupDotOp dot = groups ? getSummedGroupDot(groups) : nullptr;
    if (!dot || groups.getNumLoops() != 1 ||
        !matchPattern(groups.getLowerBound()[0], m_Zero()) ||
        !matchPattern(groups.getStep()[0], m_One()) ||
        llvm::any_of(groups.getInitVals(), [](Value init) {
          return !matchPattern(init, m_PosZeroFloat());
        }))
      return std::nullopt;
    MatrixRows m;
    m.dot = dot;
    m.groups = groups;
    m.numGroups = getParallelTripCount(groups, /*withReductions=*/true);
    if (!matchCodes(m) || !matchTiles(m, rows) || !matchStores(m, rows))
      return std::nullopt;
    // A row's group's values from the row's and the group's; the sums and
    // the tiles' indices from the group's alone.
    Block *groupBody = groups.getBody();
    for (Value value : m.getGroupValues())
      if (!isHoistable(value, groupBody, groups))
        return std::nullopt;
    SmallVector<Value> roots = {getViewRoot(m.tileSource)};
    for (Value value : llvm::concat<Value>(SmallVector<Value>(dot.getSums()),
                                           m.getTileIndices())) {
      if (!isHoistable(value, groupBody, rows))
        return std::nullopt;
      for (Operation *op : getSliceInBlock(groupBody, value))
        for (Value operand : op->getOperands())
          if (isa<MemRefType>(operand.getType()))
            roots.push_back(getViewRoot(operand));
    }
    if (!llvm::all_of(getSliceInBlock(body, m.getRowValues()),
                      computesOrReads) ||
        writesAny(rows, roots))
      return std::nullopt;
    return m;
  }

  /// Codes of whole words, each thread's run of a row's group within two
  /// of them.
  static bool matchCodes(MatrixRows &m) {
    auto unpack = m.dot.getCodes().getDefiningOp<UnpackOp>();
    if (!unpack || unpack.getOffset() != 0 ||
        unpack.getStride() != unpack.getBits())
      return false;
    m.bits = unpack.getBits();
    m.group = cast<VectorType>(unpack.getType()).getNumElements();
    m.codeWords = unpack.getWords().getDefiningOp<vector::LoadOp>();
    if (!m.codeWords || m.codeWords.getIndices().size() != 1 ||
        !m.codeWords.getMemRefType().isLastDimUnitStride() ||
        m.group % kStep != 0 || m.group * m.bits % 32 != 0 ||
        m.getThreadCodes() * m.bits > 32)
      return false;
    m.words = m.codeWords.getVectorType().getNumElements();
    return m.words * 32 == m.group * m.bits;
  }

  /// Each head's tile a vector load of one 1-D unit-stride memref from
  /// outside the rows, or of views of one at constant offsets.
  static bool matchTiles(MatrixRows &m, scf::ParallelOp rows) {
    for (Value tile : m.dot.getTiles()) {
      auto load = tile.getDefiningOp<vector::LoadOp>();
      if (!load || load.getIndices().size() != 1)
        return false;
      Value source = load.getBase();
      int64_t offset = 0;
      if (auto view = source.getDefiningOp<memref::SubViewOp>()) {
        std::optional<int64_t> constant =
            getConstantIntValue(view.getMixedOffsets()[0]);
        if (!constant || !view.hasUnitStride())
          return false;
        source = view.getSource();
        offset = *constant;
      }
      auto type = dyn_cast<MemRefType>(source.getType());
      if (!type || type.getRank() != 1 || !type.isLastDimUnitStride() ||
          (m.tileSource && source != m.tileSource) ||
          !rows.isDefinedOutsideOfLoop(source))
        return false;
      m.tileSource = source;
      m.tileOffsets.push_back(offset);
    }
    return true;
  }

  /// Each dot's sum stored once in the loop over the rows, every one alone
  /// or every one added to what its place holds (a split's value rows
  /// after its sinks': a load of the place, the sum, the store).
  static bool matchStores(MatrixRows &m, scf::ParallelOp rows) {
    for (Value result : m.groups.getResults()) {
      if (!result.hasOneUse())
        return false;
      Operation *user = *result.getUsers().begin();
      bool added = false;
      if (auto add = dyn_cast<arith::AddFOp>(user);
          add && add->hasOneUse() && add.getLhs() != add.getRhs()) {
        Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
        auto load = other.getDefiningOp<memref::LoadOp>();
        auto store = dyn_cast<memref::StoreOp>(*add->getUsers().begin());
        if (!load || !store || load.getMemRef() != store.getMemRef() ||
            load.getIndices() != store.getIndices() ||
            load->getBlock() != rows.getBody())
          return false;
        user = store;
        added = true;
      }
      auto store = dyn_cast<memref::StoreOp>(user);
      if (!store || store->getBlock() != rows.getBody() ||
          (!m.stores.empty() && added != m.added))
        return false;
      m.stores.push_back(store);
      m.added = added;
    }
    return true;
  }

  TargetInfo info;
};

} // namespace

void kvq::populateMatrixGroupDotPatterns(RewritePatternSet &patterns,
                                         const TargetInfo &info) {
  MLIRContext *ctx = patterns.getContext();
  if (info.matrix && info.matrix == MatrixUnit::getAttr(ctx) &&
      info.maxWorkers == kWarp && info.blockThreads % kWarp == 0)
    patterns.add<GroupDotsOnMatrix>(ctx, info);
}
