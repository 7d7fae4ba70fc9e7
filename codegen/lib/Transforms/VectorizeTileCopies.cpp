//===- VectorizeTileCopies.cpp - parallel loops over tiles on the CPU -----===//
//
// The CPU's form of an `scf.parallel` whose iterations already compute on
// tiles (vectors: a span = channels group of a token), where lanes are not
// left to widen the tiles by: the loop's few iterations become copies of
// its body side by side, and what each copy computes as a scalar (a group's
// range, parameters, counters) becomes one lane of a vector of the copies.
// The tiles stay a copy's own; where copies meet:
// - a tile reduced to a scalar (`vector.reduction`) is each copy's lane of
//   one reduction of all the copies' tiles (KernelBuilder::combineEach:
//   2 shuffles and one op a fold, not log2(lanes) folds each);
// - a scalar broadcast to a tile is the copy's lane of the vector;
// - a scalar stored at the induction variable is one store of the vector;
// - a tile of codes packed (kvq.pack) and stored at the induction variable
//   times its words, where the codes fill their words, is one pack of the
//   copies' codes and one store: their streams are back to back;
// - a branch on a scalar that only stores or adds lane-independent values
//   runs once if any copy takes it (AnyLane, as for vectorized loops).
// Lane by lane the ops are the body's, so results are those of the loop.
//
//===----------------------------------------------------------------------===//

#include "ParallelForms.h"

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace kvq;

namespace {

/// The most copies of a body placed side by side (a token's groups).
constexpr int64_t kMaxCopies = 8;

/// How an op of the loop's body is rewritten.
enum class Copying {
  /// Depends on no iteration: cloned once.
  Uniform,
  /// Scalar arithmetic that varies: the same op on vectors of the copies.
  Packed,
  /// Computes tiles or addresses: cloned for each copy.
  PerCopy,
  /// A tile reduced to a scalar: one reduction of the copies' tiles.
  Reduction,
  /// A scalar loaded or stored at the induction variable: one access of
  /// the copies' vector.
  PackedAccess,
  /// A store of packed codes at the induction variable times their words:
  /// one pack and one store for all copies.
  PackedCodes,
  /// Part of PackedCodes: emitted with it.
  CodesPart,
  /// A branch that runs once if any copy takes it.
  AnyLane,
  Unsupported,
};

bool isScalar(Type type) { return type.isIntOrFloat(); }

class TileCopier {
public:
  TileCopier(Value iv, int64_t copies, const TargetInfo &info)
      : iv(iv), copies(copies), info(info) {
    varying.insert(iv);
  }

  /// Whether every op of `block` but its terminator can be copied, and
  /// some op computes on tiles; records what varies.
  bool analyze(Block &block);
  /// Emits the copies of `block` at `b`.
  void copy(Block &block, OpBuilder &b, Location loc);

private:
  Copying classify(Operation *op) const;
  bool isPackedCodes(vector::StoreOp store) const;
  /// Copy `i` of `value` (its clone for that copy, or its lane).
  Value getCopy(OpBuilder &b, Value value, int64_t i);
  /// `value` as a vector of the copies.
  Value getPacked(OpBuilder &b, Value value);
  void copyPerCopy(OpBuilder &b, Operation *op);
  void copyPacked(OpBuilder &b, Operation *op);
  void copyReduction(OpBuilder &b, vector::ReductionOp op);
  void copyPackedAccess(OpBuilder &b, Operation *op);
  void copyPackedCodes(OpBuilder &b, vector::StoreOp op);
  void copyAnyLane(OpBuilder &b, scf::IfOp op);
  Type packedType(Type scalar) const {
    return VectorType::get({copies}, scalar);
  }

  Value iv;
  int64_t copies;
  const TargetInfo &info;
  llvm::DenseSet<Value> varying;
  /// OR reductions of tiles that only decide an AnyLane branch: whether
  /// any copy's lane is set.
  DenseMap<Value, Value> anyOf;
  DenseMap<Operation *, Copying> kinds;
  /// The uniform values' clones.
  IRMapping uniform;
  /// Each varying value's copies and vector, as far as computed.
  DenseMap<Value, SmallVector<Value>> perCopy;
  DenseMap<Value, Value> packed;
};

} // namespace

bool TileCopier::isPackedCodes(vector::StoreOp store) const {
  auto pack = store.getValueToStore().getDefiningOp<PackOp>();
  if (!pack || !pack->hasOneUse() || store.getIndices().size() != 1 ||
      varying.contains(store.getBase()))
    return false;
  int64_t words = pack.getWords().getType().getNumElements();
  int64_t codes = pack.getCodes().getType().getNumElements();
  return codes * pack.getBits() == 32 * words &&
         getScaledIndex(store.getIndices()[0], iv) == words &&
         store.getIndices()[0].hasOneUse();
}

/// Whether `memref` is a constant `memref.global`: its loads read the same
/// in any order.
static bool isConstantTable(Value memref) {
  auto get = memref.getDefiningOp<memref::GetGlobalOp>();
  if (!get)
    return false;
  auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
      get, get.getNameAttr());
  return global && global.getConstant();
}

Copying TileCopier::classify(Operation *op) const {
  if (!usesAny(op, varying))
    return Copying::Uniform;
  if (auto branch = dyn_cast<scf::IfOp>(op))
    return isAnyLaneBranch(branch, varying) ? Copying::AnyLane
                                            : Copying::Unsupported;
  if (op->getNumRegions())
    return Copying::Unsupported;
  if (auto store = dyn_cast<vector::StoreOp>(op))
    return isPackedCodes(store) ? Copying::PackedCodes : Copying::PerCopy;
  if (auto pack = dyn_cast<PackOp>(op))
    if (pack->hasOneUse())
      if (auto store = dyn_cast<vector::StoreOp>(*pack->user_begin()))
        if (isPackedCodes(store))
          return Copying::CodesPart;
  if (auto mul = dyn_cast<arith::MulIOp>(op))
    if (mul->hasOneUse())
      if (auto store = dyn_cast<vector::StoreOp>(*mul->user_begin()))
        if (isPackedCodes(store) && store.getIndices()[0] == mul.getResult())
          return Copying::CodesPart;
  if (auto reduction = dyn_cast<vector::ReductionOp>(op))
    return reduction.getAcc() ? Copying::Unsupported : Copying::Reduction;
  if (isa<memref::LoadOp, memref::StoreOp>(op)) {
    if (isLaneAccess(op, iv, varying))
      return Copying::PackedAccess;
    // A copy's entry of a constant table (a group's clip factor).
    auto load = dyn_cast<memref::LoadOp>(op);
    return load && isConstantTable(load.getMemRef()) ? Copying::PerCopy
                                                     : Copying::Unsupported;
  }
  // LLVM's generic intrinsics (elementwise) have no side effects either.
  if (!isMemoryEffectFree(op) && !isa<vector::LoadOp>(op) &&
      !isElementwiseOp(op))
    return Copying::Unsupported;
  bool scalars = llvm::all_of(op->getResultTypes(), [](Type type) {
    return isScalar(type) && !type.isIndex();
  });
  if (scalars && isElementwiseOp(op))
    return Copying::Packed;
  return Copying::PerCopy;
}

bool TileCopier::analyze(Block &block) {
  bool tiles = false;
  for (Operation &op : block.without_terminator()) {
    Copying kind = classify(&op);
    if (kind == Copying::Unsupported)
      return false;
    kinds[&op] = kind;
    if (kind == Copying::Uniform || kind == Copying::AnyLane)
      continue;
    for (Value result : op.getResults()) {
      varying.insert(result);
      tiles |= isa<VectorType>(result.getType());
    }
  }
  return tiles;
}

Value TileCopier::getCopy(OpBuilder &b, Value value, int64_t i) {
  if (!varying.contains(value))
    return uniform.lookupOrDefault(value);
  SmallVector<Value> &values = perCopy[value];
  if (values.empty())
    values.resize(copies);
  if (!values[i]) {
    assert(packed.count(value) && "a varying value is copied or packed");
    values[i] = vector::ExtractOp::create(b, value.getLoc(), packed[value],
                                          ArrayRef<int64_t>{i});
  }
  return values[i];
}

Value TileCopier::getPacked(OpBuilder &b, Value value) {
  if (!varying.contains(value)) {
    Value scalar = uniform.lookupOrDefault(value);
    return vector::BroadcastOp::create(b, value.getLoc(),
                                       packedType(scalar.getType()), scalar);
  }
  Value &vector = packed[value];
  if (!vector) {
    SmallVector<Value> lanes;
    for (int64_t i = 0; i < copies; ++i)
      lanes.push_back(getCopy(b, value, i));
    vector = vector::FromElementsOp::create(b, value.getLoc(),
                                            packedType(value.getType()), lanes);
  }
  return vector;
}

void TileCopier::copyPerCopy(OpBuilder &b, Operation *op) {
  for (int64_t i = 0; i < copies; ++i) {
    IRMapping mapping;
    for (Value operand : op->getOperands())
      mapping.map(operand, getCopy(b, operand, i));
    Operation *clone = b.clone(*op, mapping);
    for (auto [result, copy] :
         llvm::zip(op->getResults(), clone->getResults())) {
      SmallVector<Value> &values = perCopy[result];
      values.resize(copies);
      values[i] = copy;
    }
  }
}

void TileCopier::copyPacked(OpBuilder &b, Operation *op) {
  SmallVector<Value> operands;
  for (Value operand : op->getOperands())
    operands.push_back(getPacked(b, operand));
  SmallVector<Type> types;
  for (Type type : op->getResultTypes())
    types.push_back(packedType(type));
  OperationState state(op->getLoc(), op->getName(), operands, types,
                       op->getAttrs());
  Operation *widened = b.create(state);
  for (auto [result, vector] :
       llvm::zip(op->getResults(), widened->getResults()))
    packed[result] = vector;
}

/// Whether `value` only decides an AnyLane branch that adds nothing.
static bool onlyDecidesBranch(Value value) {
  if (!value.hasOneUse())
    return false;
  auto branch = dyn_cast<scf::IfOp>(*value.user_begin());
  if (!branch || branch.getCondition() != value)
    return false;
  WalkResult adds = branch.getThenRegion().walk(
      [](memref::AtomicRMWOp) { return WalkResult::interrupt(); });
  return !adds.wasInterrupted();
}

void TileCopier::copyReduction(OpBuilder &b, vector::ReductionOp op) {
  KernelBuilder kb(b, op.getLoc());
  SmallVector<Value> tiles;
  for (int64_t i = 0; i < copies; ++i)
    tiles.push_back(getCopy(b, op.getVector(), i));
  if (op.getKind() == vector::CombiningKind::OR &&
      onlyDecidesBranch(op.getResult())) {
    // Any lane of any copy: the tiles ORed, one reduction.
    Value all = tiles.front();
    for (Value tile : ArrayRef(tiles).drop_front())
      all = kb.bitOr(all, tile);
    anyOf[op.getResult()] = kb.anyLane(all);
    return;
  }
  bool nnan = bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::nnan);
  // The combining op of each fold; min and max of lanes never NaN are
  // compare and select (x86's vminps / vmaxps).
  std::function<Value(Value, Value)> combine;
  switch (op.getKind()) {
  case vector::CombiningKind::MINNUMF:
    if (nnan)
      combine = [&](Value x, Value y) { return kb.selectMin(x, y); };
    break;
  case vector::CombiningKind::MAXNUMF:
    if (nnan)
      combine = [&](Value x, Value y) { return kb.selectMax(x, y); };
    break;
  default:
    break;
  }
  int64_t lanes = op.getSourceVectorType().getNumElements();
  if (!combine || !llvm::isPowerOf2_64(lanes))
    return copyPerCopy(b, op);
  // Tiles wider than a register halved into one first, lane by lane.
  halveEach(kb, tiles, info.vectorLanes, combine);
  lanes = cast<VectorType>(tiles[0].getType()).getNumElements();
  if (!KernelBuilder::combinesEach(copies, lanes))
    return copyPerCopy(b, op);
  packed[op.getResult()] = kb.combineEach(tiles, combine);
}

void TileCopier::copyPackedAccess(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto [memref, indices] = getMemRefAccess(op);
  SmallVector<Value> at;
  for (Value index : indices.drop_back())
    at.push_back(uniform.lookupOrDefault(index));
  at.push_back(arith::ConstantIndexOp::create(b, loc, 0));
  Value base = uniform.lookupOrDefault(memref);
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    packed[load.getResult()] =
        vector::LoadOp::create(b, loc, packedType(load.getType()), base, at);
    return;
  }
  auto store = cast<memref::StoreOp>(op);
  vector::StoreOp::create(b, loc, getPacked(b, store.getValue()), base, at);
}

void TileCopier::copyPackedCodes(OpBuilder &b, vector::StoreOp op) {
  Location loc = op.getLoc();
  auto pack = op.getValueToStore().getDefiningOp<PackOp>();
  SmallVector<Value> codes;
  for (int64_t i = 0; i < copies; ++i)
    codes.push_back(getCopy(b, pack.getCodes(), i));
  KernelBuilder kb(b, loc);
  int64_t words = pack.getWords().getType().getNumElements() * copies;
  Value all = PackOp::create(b, loc, VectorType::get({words}, b.getI32Type()),
                             kb.concat(codes), pack.getBitsAttr());
  vector::StoreOp::create(
      b, loc, all, uniform.lookupOrDefault(op.getBase()),
      ValueRange{arith::ConstantIndexOp::create(b, loc, 0)});
}

void TileCopier::copyAnyLane(OpBuilder &b, scf::IfOp op) {
  Value any = anyOf.lookup(op.getCondition());
  widenAnyLaneBranch(b, op, any ? any : getPacked(b, op.getCondition()),
                     uniform);
}

void TileCopier::copy(Block &block, OpBuilder &b, Location loc) {
  SmallVector<Value> ivs;
  for (int64_t i = 0; i < copies; ++i)
    ivs.push_back(arith::ConstantIndexOp::create(b, loc, i));
  perCopy[iv] = ivs;
  for (Operation &op : block.without_terminator()) {
    switch (kinds.lookup(&op)) {
    case Copying::Unsupported:
      llvm_unreachable("analyze() accepted the body");
    case Copying::Uniform:
      b.clone(op, uniform);
      continue;
    case Copying::Packed:
      copyPacked(b, &op);
      continue;
    case Copying::PerCopy:
      copyPerCopy(b, &op);
      continue;
    case Copying::Reduction:
      copyReduction(b, cast<vector::ReductionOp>(op));
      continue;
    case Copying::PackedAccess:
      copyPackedAccess(b, &op);
      continue;
    case Copying::PackedCodes:
      copyPackedCodes(b, cast<vector::StoreOp>(op));
      continue;
    case Copying::CodesPart:
      continue;
    case Copying::AnyLane:
      copyAnyLane(b, cast<scf::IfOp>(op));
      continue;
    }
  }
}

namespace {

/// scf.parallel over [0, N) with step 1, one dimension, 2 <= N <= 8, whose
/// body computes on tiles, as N copies of its body side by side.
struct VectorizeTileCopies : OpRewritePattern<scf::ParallelOp> {
  VectorizeTileCopies(MLIRContext *ctx, const TargetInfo &info)
      : OpRewritePattern(ctx, /*benefit=*/1), info(info) {}

  LogicalResult matchAndRewrite(scf::ParallelOp loop,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> count = getParallelTripCount(loop);
    if (!count || *count < 2 || *count > kMaxCopies)
      return rewriter.notifyMatchFailure(loop, "not 2 to 8 iterations");
    TileCopier copier(loop.getInductionVars()[0], *count, info);
    if (!copier.analyze(*loop.getBody()))
      return rewriter.notifyMatchFailure(loop, "no tiles, or not copyable");
    copier.copy(*loop.getBody(), rewriter, loop.getLoc());
    rewriter.eraseOp(loop);
    return success();
  }

  TargetInfo info;
};

} // namespace

void kvq::halveEach(KernelBuilder &kb, MutableArrayRef<Value> vectors,
                    int64_t lanes, function_ref<Value(Value, Value)> combine) {
  int64_t width = cast<VectorType>(vectors[0].getType()).getNumElements();
  for (; width > lanes && width % 2 == 0; width /= 2)
    for (Value &vector : vectors) {
      auto half = [&](int64_t from) {
        return kb.shuffle(vector, llvm::to_vector(llvm::seq<int64_t>(
                                      from, from + width / 2)));
      };
      vector = combine(half(0), half(width / 2));
    }
}

void kvq::populateVectorizeTileCopiesPatterns(RewritePatternSet &patterns,
                                              const TargetInfo &info) {
  patterns.add<VectorizeTileCopies>(patterns.getContext(), info);
}
