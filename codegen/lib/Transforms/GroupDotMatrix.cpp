//===- GroupDotMatrix.cpp - a split's group dots on the warp's matrix unit ===//
//
// Where the target has a warp's matrix unit (#kvq.mma: m16n8k16, f16
// operands, f32 sums), a parallel loop over rows (a split's span=channels
// key tokens) whose iteration sums all the group dots of its row and stores
// each head's sum runs as products of matrices, as the emitted matrix forms
// do (AttendMatrix.cpp): a warp takes 16 rows at a time, the rows A's rows
// and the heads B's columns, so that a cached element costs its unpacking
// once instead of one multiply-add a head.
//
// A dot's sum is the same in any order of its channels, so thread t of a
// quad (lane % 4) holds A's and B's columns 2t, 2t + 1, 2t + 8 and 2t + 9
// of each of a group's s steps for the group's channels [4st, 4s(t + 1)):
// its codes of a row are one run of 4sb bits, a funnel shift of two words.
// The codes are exact in f16 and each tile element x is split into two
// f16 halves, hi = f16(x) and lo = f16(x - hi), a product each (the
// emitted matrix forms' split halves, docs/Numerics.md); a group's sums
// are then scaled by its slope and offset by its offset times the tile's
// sum, in f32.
//
// The loop becomes one iteration a thread of the block (the GPU's
// distribution gives thread i iteration i), around a loop over the warp's
// tiles of rows: the tiles' columns of B and their sums are read once a
// thread, and every lane of a warp runs the same tiles, as mma.sync needs.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"
#include "ParallelForms.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/ProgramBuilder.h"
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
  int64_t numGroups, group, bits, words;
  vector::LoadOp codeWords;
  /// Head h's tile of group g: `tileSource` at tileOffset + h * tileStride
  /// + the tiles' index at g.
  Value tileSource;
  int64_t tileOffset, tileStride;
  /// The store of each head's sum, in the loop over the rows.
  SmallVector<memref::StoreOp> stores;

  /// The matrix steps of a group, and each thread's codes of a row.
  int64_t getSteps() const { return group / kStep; }
  int64_t getThreadCodes() const { return 4 * getSteps(); }
  /// The group loop's values of a row's group: the codes' index, the slope
  /// and the offset.
  SmallVector<Value> groupValues();
  /// The index of the tiles' loads in the group loop.
  Value tileIndex();
  /// The values of the row loop's body that the group loop's values and
  /// the sums' stores read.
  SmallVector<Value> getRowValues();
};

/// Whether `op` only computes or reads (a row's addresses and views).
bool computesOrReads(Operation *op) {
  return op->getNumRegions() == 0 &&
         (isPure(op) || isa<memref::LoadOp, vector::LoadOp>(op));
}

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
    Value count = rows.getUpperBound()[0];
    scf::ParallelOp::create(rewriter, rows.getLoc(), ValueRange{pb.index(0)},
                            ValueRange{pb.index(info.blockThreads)},
                            ValueRange{pb.index(1)},
                            [&](OpBuilder &, Location, ValueRange ivs) {
                              buildThread(pb, rows, *m, count, ivs[0]);
                            });
    rewriter.eraseOp(rows);
    return success();
  }

  /// Thread `thread`'s share: its columns of B and their sums, then the
  /// warp's tiles of rows.
  void buildThread(ProgramBuilder &pb, scf::ParallelOp rows, MatrixRows &m,
                   Value count, Value thread) const {
    Value lane = pb.remU(thread, pb.index(kWarp));
    Value warp = pb.divU(thread, pb.index(kWarp));
    Value quadRow = pb.divU(lane, pb.index(4));
    Value quadColumn = pb.remU(lane, pb.index(4));
    int64_t heads = m.dot.getDots().size();
    int64_t headTiles = llvm::divideCeil(heads, kHeads);
    Block *groupBody = m.groups.getBody();

    // B: head (n * 8 + quadRow)'s tile elements at the thread's channels,
    // as f16, zero past the last head; and the sums of the heads of the
    // thread's C columns (n * 8 + 2 * quadColumn + {0, 1}) a group.
    SmallVector<Value> columns, sums;
    for (int64_t g = 0; g < m.numGroups; ++g) {
      Value at = cloneAtGroup(pb.builder(), m.tileIndex(), groupBody, g)[0];
      SmallVector<Value> groupSums =
          cloneAtGroup(pb.builder(), m.dot.getSums(), groupBody, g);
      for (int64_t n = 0; n < headTiles; ++n) {
        Value head = pb.add(pb.index(n * kHeads), quadRow);
        columns.append(loadColumns(pb, m, at, head, heads, quadColumn));
        for (int64_t half = 0; half < 2; ++half)
          sums.push_back(
              selectHeadSum(pb, groupSums, n * kHeads + half, quadColumn));
      }
    }

    Value tiles = pb.divU(pb.add(count, pb.index(kRows - 1)), pb.index(kRows));
    auto loop = scf::ForOp::create(pb.builder(), pb.getLoc(), warp, tiles,
                                   pb.index(info.blockThreads / kWarp));
    OpBuilder::InsertionGuard guard(pb.builder());
    pb.builder().setInsertionPoint(loop.getBody()->getTerminator());
    buildTile(pb, rows, m, count, loop.getInductionVar(), quadRow, quadColumn,
              columns, sums);
  }

  /// The warp's tile `tile`: its rows quadRow and quadRow + 8, each group's
  /// codes a product with B, scaled and offset, and the stores of the
  /// thread's C elements.
  void buildTile(ProgramBuilder &pb, scf::ParallelOp rows, MatrixRows &m,
                 Value count, Value tile, Value quadRow, Value quadColumn,
                 ArrayRef<Value> columns, ArrayRef<Value> sums) const {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    int64_t heads = m.dot.getDots().size();
    int64_t headTiles = llvm::divideCeil(heads, kHeads);
    int64_t steps = m.getSteps();
    Value last = pb.sub(count, pb.index(1));
    Value row0 = pb.add(pb.mul(tile, pb.index(kRows)), quadRow);
    Value rowIndex[2] = {row0, pb.add(row0, pb.index(kRows / 2))};
    // A row past the last reads the last row's codes; its sums are not
    // stored.
    IRMapping rowMapping[2];
    for (int k = 0; k < 2; ++k)
      cloneRowPrefix(b, rows, m, pb.minU(rowIndex[k], last), rowMapping[k]);

    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> acc(headTiles * 4, pb.f32(0));
    for (int64_t g = 0; g < m.numGroups; ++g) {
      SmallVector<Value> codes[2];
      Value slope[2], offset[2];
      for (int k = 0; k < 2; ++k) {
        IRMapping mapping = rowMapping[k];
        cloneGroup(b, m, g, mapping);
        codes[k] = loadThreadCodes(pb, m, mapping, quadColumn);
        slope[k] = mapping.lookupOrDefault(m.dot.getSlope());
        offset[k] = mapping.lookupOrDefault(m.dot.getOffset());
      }
      SmallVector<Value> a;
      for (int64_t s = 0; s < steps; ++s)
        a.push_back(vector::FromElementsOp::create(
            b, loc, VectorType::get({4, 2}, b.getF16Type()),
            ValueRange{codes[0][4 * s], codes[0][4 * s + 1], codes[1][4 * s],
                       codes[1][4 * s + 1], codes[0][4 * s + 2],
                       codes[0][4 * s + 3], codes[1][4 * s + 2],
                       codes[1][4 * s + 3]}));
      for (int64_t n = 0; n < headTiles; ++n) {
        Value d = arith::ConstantOp::create(
            b, loc, accType, DenseElementsAttr::get(accType, 0.0f));
        for (int64_t s = 0; s < steps; ++s)
          for (int64_t part = 0; part < 2; ++part)
            d = nvgpu::MmaSyncOp::create(
                b, loc, a[s],
                columns[((g * headTiles + n) * steps + s) * 2 + part], d,
                ArrayRef<int64_t>{kRows, kHeads, kStep});
        for (int k = 0; k < 2; ++k)
          for (int64_t half = 0; half < 2; ++half) {
            Value raw = vector::ExtractOp::create(b, loc, d,
                                                  ArrayRef<int64_t>{k, half});
            Value sum = sums[(g * headTiles + n) * 2 + half];
            Value &out = acc[n * 4 + k * 2 + half];
            out = pb.fadd(
                out, pb.fadd(pb.fmul(slope[k], raw), pb.fmul(offset[k], sum)));
          }
      }
    }
    storeSums(pb, m, rowMapping, rowIndex, count, quadColumn, acc);
    // The masked stores part the warp's lanes (a branch each in PTX); the
    // next tile's products need them all again.
    NVVM::SyncWarpOp::create(b, loc, pb.i32(-1));
  }

  /// Maps the row loop's induction variable to `row` and clones at `b` the
  /// ops of its body that the group loop's codes, parameters and the sums'
  /// stores read.
  static void cloneRowPrefix(OpBuilder &b, scf::ParallelOp rows, MatrixRows &m,
                             Value row, IRMapping &mapping) {
    Block *body = rows.getBody();
    mapping.map(rows.getInductionVars()[0], row);
    for (Operation *op : getSliceInBlock(body, m.getRowValues()))
      b.clone(*op, mapping);
  }

  /// Clones the group loop's ops of the codes' index, slope and offset at
  /// group `g` into `mapping`.
  static void cloneGroup(OpBuilder &b, MatrixRows &m, int64_t g,
                         IRMapping &mapping) {
    Block *body = m.groups.getBody();
    mapping.map(body->getArgument(0),
                arith::ConstantIndexOp::create(b, m.groups.getLoc(), g));
    for (Operation *op : getSliceInBlock(body, m.groupValues()))
      b.clone(*op, mapping);
  }

  /// The thread's codes of a row's group, as f16: its run of 4sb bits from
  /// bit 4sb * quadColumn of the group's words, a funnel shift of the word
  /// it starts in and the next (the group's last where it ends there).
  static SmallVector<Value> loadThreadCodes(ProgramBuilder &pb, MatrixRows &m,
                                            IRMapping &mapping,
                                            Value quadColumn) {
    int64_t runBits = m.getThreadCodes() * m.bits;
    Value base = mapping.lookupOrDefault(m.codeWords.getBase());
    Value first = mapping.lookupOrDefault(m.codeWords.getIndices()[0]);
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

  /// B's two f16x2 registers of each step for head `head` (an index; zero
  /// at and past `heads`), its tile's elements at the thread's channels
  /// [4s * quadColumn, 4s * (quadColumn + 1)) of the group at `at` split
  /// into two halves, hi = f16(x) and lo = f16(x - hi): the step's
  /// high columns, then its low ones.
  static SmallVector<Value> loadColumns(ProgramBuilder &pb, MatrixRows &m,
                                        Value at, Value head, int64_t heads,
                                        Value quadColumn) {
    OpBuilder &b = pb.builder();
    Location loc = pb.getLoc();
    Value valid = pb.ult(head, pb.index(heads));
    Value clamped = pb.minU(head, pb.index(heads - 1));
    Value start = pb.add(
        pb.add(pb.index(m.tileOffset), pb.mul(clamped, pb.index(m.tileStride))),
        pb.add(at, pb.mul(quadColumn, pb.index(m.getThreadCodes()))));
    Value zero = arith::ConstantOp::create(b, loc, b.getF16FloatAttr(0));
    SmallVector<Value> high, low;
    for (int64_t j = 0; j < m.getThreadCodes(); ++j) {
      Value x = pb.loadElementAsF32(m.tileSource, pb.add(start, pb.index(j)));
      Value hi = arith::TruncFOp::create(b, loc, b.getF16Type(), x);
      Value lo = arith::TruncFOp::create(b, loc, b.getF16Type(),
                                         pb.fsub(x, pb.asF32(hi)));
      high.push_back(pb.select(valid, hi, zero));
      low.push_back(pb.select(valid, lo, zero));
    }
    SmallVector<Value> columns;
    auto type = VectorType::get({2, 2}, b.getF16Type());
    for (int64_t s = 0; s < m.getSteps(); ++s)
      for (ArrayRef<Value> halves :
           {ArrayRef<Value>(high), ArrayRef<Value>(low)})
        columns.push_back(vector::FromElementsOp::create(
            b, loc, type, halves.slice(4 * s, 4)));
    return columns;
  }

  /// The sum of head `first` + 2 * quadColumn among `groupSums` (0 past the
  /// last head).
  static Value selectHeadSum(ProgramBuilder &pb, ArrayRef<Value> groupSums,
                             int64_t first, Value quadColumn) {
    Value sum = pb.f32(0);
    for (int64_t t = 0; t < 4; ++t) {
      int64_t head = first + 2 * t;
      if (head < int64_t(groupSums.size()))
        sum = pb.select(pb.eq(quadColumn, pb.index(t)), groupSums[head], sum);
    }
    return sum;
  }

  /// Stores the thread's C elements: head n * 8 + 2 * quadColumn + half of
  /// row k, where the head and the row are. The stores are masked, not
  /// branches, so that the loop stays one block (kvq-pipeline-loads).
  static void storeSums(ProgramBuilder &pb, MatrixRows &m,
                        IRMapping (&rowMapping)[2], Value (&rowIndex)[2],
                        Value count, Value quadColumn, ArrayRef<Value> acc) {
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
        vector::MaskedStoreOp::create(
            b, loc, rowMapping[k].lookupOrDefault(store.getMemRef()), indices,
            vector::BroadcastOp::create(
                b, loc, VectorType::get({1}, b.getI1Type()), taken),
            vector::BroadcastOp::create(
                b, loc, VectorType::get({1}, value.getType()), value));
      }
    }
  }

  std::optional<MatrixRows> match(scf::ParallelOp rows) const {
    if (rows.getNumLoops() != 1 || rows.getNumResults() != 0 ||
        !matchPattern(rows.getLowerBound()[0], m_Zero()) ||
        !matchPattern(rows.getStep()[0], m_One()))
      return std::nullopt;
    Block *body = rows.getBody();
    scf::ParallelOp groups;
    for (Operation &op : body->without_terminator()) {
      auto loop = dyn_cast<scf::ParallelOp>(&op);
      if (loop && !groups)
        groups = loop;
      else if (!computesOrReads(&op) && !isa<memref::StoreOp>(op) &&
               !isa<memref::PrefetchOp>(op))
        return std::nullopt;
    }
    if (!groups)
      return std::nullopt;
    GroupDotOp dot = getSummedGroupDot(groups);
    std::optional<int64_t> numGroups =
        getParallelTripCount(groups, /*withReductions=*/true);
    if (!dot || !numGroups ||
        llvm::any_of(groups.getInitVals(), [](Value init) {
          return !matchPattern(init, m_PosZeroFloat());
        }))
      return std::nullopt;
    MatrixRows m{dot, groups, *numGroups, 0, 0, 0, {}, {}, 0, 0, {}};
    if (!matchCodes(m) || !matchTiles(m, rows) || !matchStores(m, rows))
      return std::nullopt;
    // The group's values from the row's: the codes' index, the slope and
    // offset; the sums from outside the rows.
    Block *groupBody = groups.getBody();
    for (Value value : m.groupValues())
      if (!isHoistable(value, groupBody, groups))
        return std::nullopt;
    SmallVector<Value> roots = {getViewRoot(m.tileSource)};
    for (Value sum : dot.getSums()) {
      if (!isHoistable(sum, groupBody, rows))
        return std::nullopt;
      for (Operation *op : getSliceInBlock(groupBody, sum))
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
        m.getThreadCodes() * m.bits > 32 ||
        !m.groups.isDefinedOutsideOfLoop(m.codeWords.getBase()))
      return false;
    m.words = m.codeWords.getVectorType().getNumElements();
    return m.words * 32 == m.group * m.bits;
  }

  /// Each head's tile a vector load at one index of a view of one 1-D
  /// memref (from outside the rows), the heads' views evenly spaced.
  static bool matchTiles(MatrixRows &m, scf::ParallelOp rows) {
    Value index;
    SmallVector<int64_t> offsets;
    for (Value tile : m.dot.getTiles()) {
      auto load = tile.getDefiningOp<vector::LoadOp>();
      auto view =
          load ? load.getBase().getDefiningOp<memref::SubViewOp>() : nullptr;
      std::optional<int64_t> offset =
          view ? getConstantIntValue(view.getMixedOffsets()[0]) : std::nullopt;
      if (!offset || load.getIndices().size() != 1 ||
          (index && load.getIndices()[0] != index) ||
          view.getSourceType().getRank() != 1 ||
          !view.getSourceType().isLastDimUnitStride() ||
          !view.hasUnitStride() ||
          (m.tileSource && view.getSource() != m.tileSource) ||
          !rows.isDefinedOutsideOfLoop(view.getSource()))
        return false;
      index = load.getIndices()[0];
      m.tileSource = view.getSource();
      offsets.push_back(*offset);
    }
    m.tileOffset = offsets[0];
    m.tileStride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
    for (auto [h, offset] : llvm::enumerate(offsets))
      if (offset != m.tileOffset + int64_t(h) * m.tileStride)
        return false;
    return isHoistable(index, m.groups.getBody(), rows);
  }

  /// Each dot's sum stored once, in the loop over the rows.
  static bool matchStores(MatrixRows &m, scf::ParallelOp rows) {
    for (Value result : m.groups.getResults()) {
      if (!result.hasOneUse())
        return false;
      auto store = dyn_cast<memref::StoreOp>(*result.getUsers().begin());
      if (!store || store.getValue() != result ||
          store->getBlock() != rows.getBody())
        return false;
      m.stores.push_back(store);
    }
    return true;
  }

  TargetInfo info;
};

} // namespace

SmallVector<Value> MatrixRows::groupValues() {
  return {codeWords.getIndices()[0], dot.getSlope(), dot.getOffset()};
}

SmallVector<Value> MatrixRows::getRowValues() {
  SmallVector<Value> values = groupValues();
  values.push_back(codeWords.getBase());
  for (Operation *op : getSliceInBlock(groups.getBody(), groupValues()))
    llvm::append_range(values, op->getOperands());
  for (memref::StoreOp store : stores) {
    values.push_back(store.getMemRef());
    llvm::append_range(values, store.getIndices());
  }
  return values;
}

Value MatrixRows::tileIndex() {
  return cast<vector::LoadOp>(dot.getTiles()[0].getDefiningOp())
      .getIndices()[0];
}

void kvq::populateMatrixGroupDotPatterns(RewritePatternSet &patterns,
                                         const TargetInfo &info) {
  MLIRContext *ctx = patterns.getContext();
  if (info.matrix && info.matrix == MatrixUnit::getAttr(ctx) &&
      info.maxWorkers == kWarp && info.blockThreads % kWarp == 0)
    patterns.add<GroupDotsOnMatrix>(ctx, info);
}
