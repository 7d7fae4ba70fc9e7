//===- Vectorizer.cpp - a kernel program's loop body over lanes ----------===//
//
// Widens a parallel loop's body over lanes of its induction variable
// (Vectorizer.h): ops that do not vary are cloned, elementwise ops run on
// vectors, loads and stores at the induction variable (or at a lane form
// of it) are vector loads and stores, loops inside carry vectors; and the
// loop itself becomes an scf.for over vectors (vectorizeLoop).
//
//===----------------------------------------------------------------------===//

#include "Vectorizer.h"

#include "ParallelForms.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/SmallVectorExtras.h"

#include <numeric>

using namespace mlir;
using namespace kvq;

static Value combine(OpBuilder &b, Block &combiner, Value x, Value y,
                     unsigned lanes);

/// The host's cache line: a prefetch of lanes' elements fetches each once.
static constexpr int64_t kCacheLineBytes = 64;

bool Vectorizer::isRowStore(vector::StoreOp op) const {
  auto row = op.getValueToStore().getDefiningOp<vector::FromElementsOp>();
  ValueRange indices = op.getIndices();
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!row || !row->hasOneUse() || indices.empty() ||
      failed(op.getMemRefType().getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || varying.contains(op.getBase()) ||
      llvm::any_of(indices.drop_back(),
                   [&](Value index) { return varying.contains(index); }))
    return false;
  return getScaledIndex(indices.back(), iv) ==
         int64_t(row.getType().getNumElements());
}

/// `x + y`.
static LaneForm addForms(LaneForm x, LaneForm y) {
  int64_t align = std::gcd(x.align, y.align), offset = x.offset + y.offset;
  return {align, align ? offset % align : offset, x.stride + y.stride};
}

/// `x - y`, y the same in every lane (indices are non-negative).
static std::optional<LaneForm> subtractForms(LaneForm x, LaneForm y) {
  if (y.stride != 0)
    return std::nullopt;
  int64_t align = std::gcd(x.align, y.align), offset = x.offset - y.offset;
  if (align == 0)
    return offset < 0 ? std::nullopt
                      : std::optional<LaneForm>({0, offset, x.stride});
  return LaneForm{align, (offset % align + align) % align, x.stride};
}

/// The lesser or greater of `x` and `y`, both the same in every lane: one
/// of them.
static std::optional<LaneForm> extremumForm(LaneForm x, LaneForm y) {
  if (x.stride != 0 || y.stride != 0)
    return std::nullopt;
  int64_t align = std::gcd(x.align, y.align);
  if (align == 0 || x.offset % align != y.offset % align)
    return LaneForm{};
  return LaneForm{align, x.offset % align, 0};
}

/// `x * k`, k a constant.
static std::optional<LaneForm> scaleForm(LaneForm x, int64_t k) {
  if (k < 0 || k > (int64_t(1) << 20) || x.align > (int64_t(1) << 40))
    return std::nullopt;
  return LaneForm{x.align * k, x.offset * k, x.stride * k};
}

/// `x / d` over `lanes` lanes, d a positive constant.
static std::optional<LaneForm> divideForm(LaneForm x, int64_t d,
                                          unsigned lanes) {
  int64_t last = x.offset + x.stride * (lanes - 1);
  if (x.align == 0 || x.align % d == 0) {
    // U / d + (offset + stride * l) / d: the lanes' part the same quotient
    // in every lane, or a multiple of d apart.
    if (x.offset / d == last / d)
      return LaneForm{x.align / d, x.offset / d, 0};
    if (x.stride % d == 0)
      return LaneForm{x.align / d, x.offset / d, x.stride / d};
    return std::nullopt;
  }
  // U mod d is at most d - align: no lane reaches the next multiple of d.
  if (d % x.align == 0 && last < x.align)
    return LaneForm{};
  return std::nullopt;
}

/// `x mod d` over `lanes` lanes, d a positive constant.
static std::optional<LaneForm> remainderForm(LaneForm x, int64_t d,
                                             unsigned lanes) {
  int64_t span = x.stride * (lanes - 1);
  if (x.align == 0 || x.align % d == 0) {
    if (x.offset % d + span < d)
      return LaneForm{0, x.offset % d, x.stride};
    return std::nullopt;
  }
  if (d % x.align == 0 && x.offset + span < x.align)
    return x;
  return std::nullopt;
}

std::optional<LaneForm> Vectorizer::getForm(Value value) const {
  if (value == iv)
    return LaneForm{ivAlign, 0, 1};
  if (auto known = forms.find(value); known != forms.end())
    return known->second;
  if (varying.contains(value))
    return std::nullopt;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)) && !constant.isNegative() &&
      constant.getActiveBits() < 40)
    return LaneForm{0, constant.getSExtValue(), 0};
  return LaneForm{};
}

std::optional<LaneForm> Vectorizer::computeForm(Operation *op) const {
  if (op->getNumResults() != 1 ||
      !op->getResult(0).getType().isSignlessIntOrIndex())
    return std::nullopt;
  // Indices and their arithmetic are non-negative and fit their types.
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtUIOp,
          arith::TruncIOp>(op))
    return getForm(op->getOperand(0));
  if (op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<LaneForm> x = getForm(op->getOperand(0)),
                          y = getForm(op->getOperand(1));
  if (!x || !y || x->stride < 0 || y->stride < 0)
    return std::nullopt;
  auto isConstant = [](LaneForm form) {
    return form.align == 0 && form.stride == 0;
  };
  if (isa<arith::AddIOp>(op))
    return addForms(*x, *y);
  if (isa<arith::SubIOp>(op))
    return subtractForms(*x, *y);
  if (isa<arith::MinUIOp, arith::MaxUIOp, arith::MinSIOp, arith::MaxSIOp>(op))
    return extremumForm(*x, *y);
  if (isa<arith::MulIOp>(op)) {
    if (isConstant(*y))
      return scaleForm(*x, y->offset);
    if (isConstant(*x))
      return scaleForm(*y, x->offset);
    return std::nullopt;
  }
  if (!isConstant(*y) || y->offset <= 0)
    return std::nullopt;
  if (isa<arith::DivUIOp>(op))
    return divideForm(*x, y->offset, lanes);
  if (isa<arith::RemUIOp>(op))
    return remainderForm(*x, y->offset, lanes);
  return std::nullopt;
}

std::optional<int64_t> Vectorizer::getAccessStride(Operation *op) const {
  auto [memref, indices] = getMemRefAccess(op);
  if (!memref || indices.empty() || varying.contains(memref))
    return std::nullopt;
  if (llvm::any_of(indices.drop_back(),
                   [&](Value index) { return varying.contains(index); }))
    return std::nullopt;
  auto form = forms.find(indices.back());
  SmallVector<int64_t> strides;
  int64_t offset;
  // A store, of one element a lane, at most 1.
  int64_t most = isa<memref::StoreOp>(op) ? 1 : maxLoadStride;
  if (form == forms.end() || form->second.stride < 1 ||
      form->second.stride > most ||
      failed(cast<MemRefType>(memref.getType())
                 .getStridesAndOffset(strides, offset)) ||
      strides.back() != 1)
    return std::nullopt;
  return form->second.stride;
}

SmallVector<Value> Vectorizer::getShiftedInductions(Block &block) const {
  SmallVector<Value> shifted;
  for (Operation &op : block.without_terminator()) {
    if (op.getNumResults() != 1)
      continue;
    auto form = forms.find(op.getResult(0));
    if (form != forms.end() && form->second.stride == 1 &&
        form->second.align == 1)
      shifted.push_back(op.getResult(0));
  }
  return shifted;
}

Value Vectorizer::firstLaneOf(LaneChunk &chunk, Value value) const {
  if (value == iv)
    return chunk.first;
  if (Value scalar = chunk.firstLanes.lookupOrNull(value))
    return scalar;
  return chunk.mapping.lookupOrDefault(value);
}

bool Vectorizer::needsLanes(Value value) const {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    bool lastOperand = use.getOperandNumber() + 1 == user->getNumOperands();
    switch (classify(user)) {
    case Widening::Uniform:
      continue;
    case Widening::LaneIndex:
      if (needsLanes(user->getResult(0)))
        return true;
      continue;
    case Widening::StridedLoad:
    case Widening::LaneStore:
    case Widening::LanePrefetch:
      // The last index: read at the first lane.
      if (lastOperand)
        continue;
      return true;
    default:
      return true;
    }
  }
  return false;
}

Widening Vectorizer::classify(Operation *op) const {
  if (!usesAny(op, varying))
    return Widening::Scalar;
  if (op->getNumResults() == 1) {
    auto form = forms.find(op->getResult(0));
    if (form != forms.end())
      return form->second.stride == 0 ? Widening::Uniform : Widening::LaneIndex;
  }
  if (isa<DequantizeOp>(op))
    return Widening::Dequantize;
  if (auto branch = dyn_cast<scf::IfOp>(op))
    return isAnyLaneBranch(branch, varying) ? Widening::AnyLane
                                            : Widening::Unsupported;
  if (auto row = dyn_cast<vector::FromElementsOp>(op)) {
    return row->hasOneUse() && isa<vector::StoreOp>(*row->user_begin()) &&
                   row.getType().getRank() == 1 &&
                   row.getType().getElementType().isIntOrFloat()
               ? Widening::RowPart
               : Widening::Unsupported;
  }
  if (auto store = dyn_cast<vector::StoreOp>(op))
    return isRowStore(store) ? Widening::RowStore : Widening::Unsupported;
  if (auto mul = dyn_cast<arith::MulIOp>(op))
    if (mul->hasOneUse() && isa<vector::StoreOp>(*mul->user_begin()) &&
        getScaledIndex(mul, iv))
      return Widening::RowPart;
  if (isa<memref::LoadOp, memref::StoreOp>(op)) {
    // A stored value may vary.
    if (isLaneAccess(op, iv, varying))
      return Widening::Vector;
    if (!getAccessStride(op))
      return Widening::Unsupported;
    return isa<memref::LoadOp>(op) ? Widening::StridedLoad
                                   : Widening::LaneStore;
  }
  if (auto prefetch = dyn_cast<memref::PrefetchOp>(op)) {
    ValueRange indices = prefetch.getIndices();
    bool lastVaries = llvm::none_of(indices.drop_back(), [&](Value index) {
      return varying.contains(index);
    });
    auto form = indices.empty() ? forms.end() : forms.find(indices.back());
    return lastVaries && form != forms.end() && form->second.stride > 0
               ? Widening::LanePrefetch
               : Widening::Unsupported;
  }
  // A loop whose bounds every lane shares, carrying scalars.
  auto loopOf = [&](ValueRange bounds, ValueRange inits) {
    bool scalars = llvm::all_of(
        inits, [](Value init) { return init.getType().isIntOrFloat(); });
    return scalars && !llvm::any_of(
                          bounds,
                          [&](Value bound) { return varying.contains(bound); })
               ? Widening::Loop
               : Widening::Unsupported;
  };
  if (auto loop = dyn_cast<scf::ParallelOp>(op); loop && serialReductions &&
                                                 loop.getNumLoops() == 1 &&
                                                 loop.getNumResults() != 0)
    return loopOf(
        {loop.getLowerBound()[0], loop.getUpperBound()[0], loop.getStep()[0]},
        loop.getInitVals());
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return loopOf({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()},
                  loop.getInitArgs());
  // The induction variable is an address, never a value.
  if (llvm::is_contained(op->getOperands(), iv))
    return Widening::Unsupported;
  if (isElementwiseOp(op) && llvm::all_of(op->getResultTypes(), [](Type type) {
        return type.isIntOrFloat();
      }))
    return Widening::Elementwise;
  return Widening::Unsupported;
}

bool Vectorizer::isAligned(Operation &op) const {
  // The assumed value, or the same op on the same operands computing it
  // again (a page's index for its prefetch).
  Operation *assumed = aligned ? aligned.getDefiningOp() : nullptr;
  return assumed && op.getNumResults() == 1 &&
         op.getName() == assumed->getName() &&
         op.getOperands() == assumed->getOperands() &&
         op.getAttrDictionary() == assumed->getAttrDictionary();
}

bool Vectorizer::analyze(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  return analyze(ops);
}

bool Vectorizer::analyze(ArrayRef<Operation *> ops) {
  for (Operation *each : ops) {
    Operation &op = *each;
    if (isAligned(op))
      forms[op.getResult(0)] = LaneForm{alignedTo, 0, 1};
    else if (usesAny(&op, varying))
      if (std::optional<LaneForm> form = computeForm(&op))
        forms[op.getResult(0)] = *form;
    switch (classify(&op)) {
    case Widening::Scalar:
    case Widening::Uniform:
      continue;
    case Widening::Unsupported:
      return false;
    case Widening::Vector:
    case Widening::Elementwise:
    case Widening::RowPart:
    case Widening::LaneIndex:
    case Widening::Dequantize:
    case Widening::StridedLoad:
      for (Value result : op.getResults())
        varying.insert(result);
      continue;
    case Widening::AnyLane:
    case Widening::RowStore:
    case Widening::LaneStore:
    case Widening::LanePrefetch:
      continue;
    case Widening::Loop: {
      // Its iteration arguments and results vary: they are carried as
      // vectors whatever their start.
      if (auto loop = dyn_cast<scf::ForOp>(op))
        for (Value arg : loop.getRegionIterArgs())
          varying.insert(arg);
      for (Value result : op.getResults())
        varying.insert(result);
      if (!analyze(op.getRegion(0).front()))
        return false;
      continue;
    }
    }
  }
  return true;
}

SmallVector<Operation *> Vectorizer::getUniformOps(ArrayRef<Operation *> ops) {
  if (!analyze(ops))
    return {};
  return llvm::filter_to_vector(ops, [&](Operation *op) {
    return llvm::none_of(op->getResults(), [&](Value result) {
      return varying.contains(result);
    });
  });
}

/// `value` as a vector of `lanes`, broadcast if it is scalar.
static Value broadcastTo(OpBuilder &b, Location loc, Value value,
                         unsigned lanes) {
  if (isa<VectorType>(value.getType()))
    return value;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, value.getType()), value);
}

/// The same elementwise `op` on vectors of `lanes`, its operands (mapped)
/// broadcast where they are scalars; maps its results.
static void widenElementwise(OpBuilder &b, Operation &op, IRMapping &mapping,
                             unsigned lanes) {
  Location loc = op.getLoc();
  SmallVector<Value> operands;
  for (Value operand : op.getOperands())
    operands.push_back(
        broadcastTo(b, loc, mapping.lookupOrDefault(operand), lanes));
  SmallVector<Type> types;
  for (Type type : op.getResultTypes())
    types.push_back(VectorType::get({lanes}, type));
  OperationState state(loc, op.getName(), operands, types, op.getAttrs());
  mapping.map(op.getResults(), b.create(state)->getResults());
}

Value Vectorizer::asVector(OpBuilder &b, Location loc, Value value) const {
  return broadcastTo(b, loc, value, lanes);
}

void Vectorizer::widen(Block &block, OpBuilder &b,
                       MutableArrayRef<LaneChunk> chunks) {
  for (Operation &op : block.without_terminator()) {
    if (integerDots && &op == integerDots->reduction.getOperation()) {
      widenIntegerDots(b, chunks);
      continue;
    }
    if (valueDots && &op == valueDots->reduction.getOperation()) {
      widenValueDots(b, chunks);
      continue;
    }
    Widening widening = classify(&op);
    if (widening == Widening::Loop) {
      widenLoop(&op, b, chunks);
      continue;
    }
    // An op of no lane whose operands are the same in every chunk (a
    // token's page, its weights) is the same op in each: one serves all.
    if (widening == Widening::Scalar && chunks.size() > 1 &&
        isSharedByChunks(op, chunks)) {
      Operation *shared = b.clone(op, chunks.front().mapping);
      for (LaneChunk &chunk : chunks.drop_front())
        chunk.mapping.map(op.getResults(), shared->getResults());
      continue;
    }
    for (LaneChunk &chunk : chunks)
      widenOp(op, b, chunk);
  }
}

bool Vectorizer::isSharedByChunks(Operation &op,
                                  ArrayRef<LaneChunk> chunks) const {
  auto same = [&](Value value) {
    Value first = chunks.front().mapping.lookupOrDefault(value);
    return llvm::all_of(chunks.drop_front(), [&](const LaneChunk &chunk) {
      return chunk.mapping.lookupOrDefault(value) == first;
    });
  };
  // Every value it reads from outside itself, in its regions too.
  WalkResult walk = op.walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (!op.isAncestor(operand.getParentBlock()->getParentOp()) &&
          !same(operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

void Vectorizer::mapLaneIndices(OpBuilder &b, Location loc,
                                LaneChunk &chunk) const {
  if (chunk.mapping.contains(iv))
    return;
  SmallVector<APInt> steps;
  for (unsigned l = 0; l < lanes; ++l)
    steps.push_back(APInt(64, l));
  auto type = VectorType::get({lanes}, b.getIndexType());
  Value step =
      arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, steps));
  chunk.mapping.map(
      iv, arith::AddIOp::create(b, loc, asVector(b, loc, chunk.first), step));
}

void Vectorizer::widenOp(Operation &op, OpBuilder &b, LaneChunk &chunk) {
  Location loc = op.getLoc();
  IRMapping &mapping = chunk.mapping;
  Value first = chunk.first;
  switch (classify(&op)) {
  case Widening::Unsupported:
  case Widening::Loop:
    llvm_unreachable("analyze() accepted the body; widen() widens loops");
  case Widening::Scalar:
    b.clone(op, mapping);
    return;
  case Widening::AnyLane:
    widenAnyLaneBranch(
        b, cast<scf::IfOp>(op),
        mapping.lookupOrDefault(cast<scf::IfOp>(op).getCondition()), mapping);
    return;
  case Widening::RowPart:
    return;
  case Widening::RowStore:
    widenRowStore(cast<vector::StoreOp>(op), b, chunk);
    return;
  case Widening::Vector: {
    auto indicesOf = [&](ValueRange indices) {
      SmallVector<Value> mapped;
      for (Value index : indices.drop_back())
        mapped.push_back(mapping.lookupOrDefault(index));
      mapped.push_back(first);
      return mapped;
    };
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      Value vector =
          vector::LoadOp::create(b, loc, vectorOf(load.getType()),
                                 mapping.lookupOrDefault(load.getMemRef()),
                                 indicesOf(load.getIndices()));
      mapping.map(load.getResult(), vector);
      return;
    }
    auto store = cast<memref::StoreOp>(op);
    vector::StoreOp::create(
        b, loc, asVector(b, loc, mapping.lookupOrDefault(store.getValue())),
        mapping.lookupOrDefault(store.getMemRef()),
        indicesOf(store.getIndices()));
    return;
  }
  case Widening::Elementwise:
    if (llvm::is_contained(op.getOperands(), iv))
      mapLaneIndices(b, loc, chunk);
    widenElementwise(b, op, mapping, lanes);
    return;
  case Widening::Uniform:
  case Widening::LaneIndex: {
    // The first lane's value, from the first lane's operands.
    IRMapping scalars;
    for (Value operand : op.getOperands())
      scalars.map(operand, firstLaneOf(chunk, operand));
    Value scalar = b.clone(op, scalars)->getResult(0);
    chunk.firstLanes.map(op.getResult(0), scalar);
    if (classify(&op) == Widening::Uniform) {
      mapping.map(op.getResult(0), scalar);
      return;
    }
    if (!needsLanes(op.getResult(0)))
      return;
    mapLaneIndices(b, loc, chunk);
    widenElementwise(b, op, mapping, lanes);
    return;
  }
  case Widening::StridedLoad: {
    auto load = cast<memref::LoadOp>(op);
    int64_t stride = *getAccessStride(&op);
    SmallVector<Value> indices;
    for (Value index : load.getIndices().drop_back())
      indices.push_back(mapping.lookupOrDefault(index));
    indices.push_back(firstLaneOf(chunk, load.getIndices().back()));
    // Exactly the span of the lanes: nothing past the last lane's element
    // is read.
    int64_t span = stride * (lanes - 1) + 1;
    Value all = vector::LoadOp::create(
        b, loc, VectorType::get({span}, load.getType()),
        mapping.lookupOrDefault(load.getMemRef()), indices);
    if (stride > 1) {
      SmallVector<int64_t> picks;
      for (unsigned l = 0; l < lanes; ++l)
        picks.push_back(l * stride);
      all = vector::ShuffleOp::create(b, loc, all, all, picks);
    }
    mapping.map(load.getResult(), all);
    return;
  }
  case Widening::LanePrefetch: {
    // A hint: each cache line the lanes' elements lie in, once.
    auto prefetch = cast<memref::PrefetchOp>(op);
    int64_t stride = forms.lookup(prefetch.getIndices().back()).stride;
    int64_t bytes = prefetch.getMemRefType().getElementTypeBitWidth() / 8;
    int64_t step = std::max<int64_t>(1, kCacheLineBytes / (stride * bytes));
    SmallVector<Value> indices;
    for (Value index : prefetch.getIndices())
      indices.push_back(mapping.lookupOrDefault(index));
    Value firstIndex = firstLaneOf(chunk, prefetch.getIndices().back());
    for (int64_t l = 0; l < int64_t(lanes); l += step) {
      indices.back() = arith::AddIOp::create(
          b, loc, firstIndex,
          arith::ConstantIndexOp::create(b, loc, l * stride));
      memref::PrefetchOp::create(
          b, loc, mapping.lookupOrDefault(prefetch.getMemref()), indices,
          prefetch.getIsWrite(), prefetch.getLocalityHint(),
          prefetch.getIsDataCache());
    }
    return;
  }
  case Widening::LaneStore: {
    auto store = cast<memref::StoreOp>(op);
    SmallVector<Value> indices;
    for (Value index : store.getIndices().drop_back())
      indices.push_back(mapping.lookupOrDefault(index));
    indices.push_back(firstLaneOf(chunk, store.getIndices().back()));
    vector::StoreOp::create(
        b, loc, asVector(b, loc, mapping.lookupOrDefault(store.getValue())),
        mapping.lookupOrDefault(store.getMemRef()), indices);
    return;
  }
  case Widening::Dequantize: {
    auto dequantize = cast<DequantizeOp>(op);
    KernelBuilder kb(b, loc);
    kb.setLanes(lanes);
    Quantizer quantizer(kb, dequantize.getScheme());
    auto lanesOf = [&](Value value) {
      return asVector(b, loc, mapping.lookupOrDefault(value));
    };
    mapping.map(dequantize.getResult(),
                quantizer.dequantize(lanesOf(dequantize.getCode()),
                                     lanesOf(dequantize.getScale()),
                                     lanesOf(dequantize.getZero())));
    return;
  }
  }
}

void Vectorizer::widenLoop(Operation *loop, OpBuilder &b,
                           MutableArrayRef<LaneChunk> chunks) {
  widenLoop(loop, b, chunks, {}, {}, {});
}

void Vectorizer::widenLoop(Operation *loop, OpBuilder &b,
                           MutableArrayRef<LaneChunk> chunks, Value lowerAt,
                           Value upperAt, ValueRange initsAt) {
  Location loc = loop->getLoc();
  auto serial = dyn_cast<scf::ForOp>(loop);
  auto reduction = dyn_cast<scf::ParallelOp>(loop);
  Value lower = serial ? serial.getLowerBound() : reduction.getLowerBound()[0];
  Value upper = serial ? serial.getUpperBound() : reduction.getUpperBound()[0];
  Value step = serial ? serial.getStep() : reduction.getStep()[0];
  Value inductionVar =
      serial ? serial.getInductionVar() : reduction.getInductionVars()[0];
  ValueRange initValues =
      serial ? ValueRange(serial.getInitArgs()) : reduction.getInitVals();
  Block *loopBody = serial ? serial.getBody() : reduction.getBody();
  // The chunks share one loop where they share its bounds and step (which
  // vary with no lane, but may with the chunk: a channel's group).
  IRMapping &bounds = chunks.front().mapping;
  for (Value bound : {lower, upper, step})
    for (LaneChunk &chunk : chunks.drop_front())
      if (chunk.mapping.lookupOrDefault(bound) !=
          bounds.lookupOrDefault(bound)) {
        assert(!lowerAt && !upperAt && initsAt.empty() &&
               "bounds given for chunks that share them");
        for (LaneChunk &each : chunks)
          widenLoop(loop, b, each);
        return;
      }
  SmallVector<Value> inits(initsAt);
  if (inits.empty())
    for (LaneChunk &chunk : chunks)
      for (Value init : initValues)
        inits.push_back(asVector(b, loc, chunk.mapping.lookupOrDefault(init)));
  auto widened = scf::ForOp::create(
      b, loc, lowerAt ? lowerAt : bounds.lookupOrDefault(lower),
      upperAt ? upperAt : bounds.lookupOrDefault(upper),
      bounds.lookupOrDefault(step), inits);
  unsigned carried = initValues.size();
  for (auto [k, chunk] : llvm::enumerate(chunks)) {
    chunk.mapping.map(inductionVar, widened.getInductionVar());
    if (serial)
      chunk.mapping.map(
          serial.getRegionIterArgs(),
          widened.getRegionIterArgs().slice(k * carried, carried));
  }
  {
    OpBuilder::InsertionGuard guard(b);
    // The builder gave the loop a yield when it has no results.
    Block *body = widened.getBody();
    if (body->empty())
      b.setInsertionPointToEnd(body);
    else
      b.setInsertionPoint(&body->back());
    widen(*loopBody, b, chunks);
    if (carried != 0) {
      // A reduction's sums: each carried sum combined with the iteration's
      // value, in order.
      SmallVector<Value> yielded;
      for (auto [k, chunk] : llvm::enumerate(chunks))
        for (auto [i, value] :
             llvm::enumerate(loopBody->getTerminator()->getOperands())) {
          Value lanesOf =
              asVector(b, loc, chunk.mapping.lookupOrDefault(value));
          yielded.push_back(
              serial ? lanesOf
                     : combine(b,
                               cast<scf::ReduceOp>(loopBody->getTerminator())
                                   .getReductions()[i]
                                   .front(),
                               widened.getRegionIterArgs()[k * carried + i],
                               lanesOf, lanes));
        }
      scf::YieldOp::create(b, loc, yielded);
    }
  }
  for (auto [k, chunk] : llvm::enumerate(chunks))
    chunk.mapping.map(loop->getResults(),
                      widened.getResults().slice(k * carried, carried));
}

void Vectorizer::widenRowStore(vector::StoreOp op, OpBuilder &b,
                               LaneChunk &chunk) {
  Location loc = op.getLoc();
  IRMapping &mapping = chunk.mapping;
  auto row = op.getValueToStore().getDefiningOp<vector::FromElementsOp>();
  int64_t n = row.getType().getNumElements();
  // The row's elements, a vector of lanes each, concatenated...
  Value all;
  for (Value element : row.getElements()) {
    Value lanesOf = asVector(b, loc, mapping.lookupOrDefault(element));
    if (!all) {
      all = lanesOf;
      continue;
    }
    int64_t size = cast<VectorType>(all.getType()).getNumElements();
    all = vector::ShuffleOp::create(
        b, loc, all, lanesOf,
        llvm::to_vector(llvm::seq<int64_t>(0, size + lanes)));
  }
  // ... then interleaved: lane j's row goes to elements [j n, j n + n).
  if (n > 1) {
    SmallVector<int64_t> interleave;
    for (unsigned j = 0; j < lanes; ++j)
      for (int64_t w = 0; w < n; ++w)
        interleave.push_back(w * lanes + j);
    all = vector::ShuffleOp::create(b, loc, all, all, interleave);
  }
  SmallVector<Value> indices;
  for (Value index : op.getIndices().drop_back())
    indices.push_back(mapping.lookupOrDefault(index));
  indices.push_back(arith::MulIOp::create(
      b, loc, chunk.first, arith::ConstantIndexOp::create(b, loc, n)));
  vector::StoreOp::create(b, loc, all, mapping.lookupOrDefault(op.getBase()),
                          indices);
}

/// Combines vectors `x` and `y` of `lanes` by `combiner` (an scf.reduce
/// region's block), lane by lane.
static Value combine(OpBuilder &b, Block &combiner, Value x, Value y,
                     unsigned lanes) {
  IRMapping mapping;
  mapping.map(combiner.getArgument(0), x);
  mapping.map(combiner.getArgument(1), y);
  for (Operation &op : combiner.without_terminator())
    widenElementwise(b, op, mapping, lanes);
  return mapping.lookup(combiner.getTerminator()->getOperand(0));
}

/// The combination of `lanes`' elements of `shares` by `combiner`, halving
/// the vector until one lane is left.
static Value combineLanes(OpBuilder &b, Location loc, Block &combiner,
                          Value shares, unsigned lanes) {
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    // A half as a shuffle: the host's LLVM lowering has no pattern for a
    // strided slice.
    auto slice = [&](int64_t offset) {
      auto mask = llvm::to_vector(llvm::seq<int64_t>(offset, offset + half));
      return vector::ShuffleOp::create(b, loc, shares, shares, mask);
    };
    Value low = slice(0), high = slice(half);
    shares = combine(b, combiner, low, high, unsigned(half));
  }
  return vector::ExtractOp::create(b, loc, shares, ArrayRef<int64_t>{0});
}

/// Each of `shares` (vectors of `lanes`, the shares of `reduce`'s
/// reductions) combined down to one value. Where every reduction has the
/// same combiner and they are a power of two of them, at most the lanes
/// (the dots of a tile's heads), all at once (KernelBuilder::combineEach: a
/// fold of vectors into one, 2 shuffles and one op a step); else each
/// vector halved by itself.
static SmallVector<Value> combineEachLanes(OpBuilder &b, scf::ReduceOp reduce,
                                           ValueRange shares, unsigned lanes) {
  Location loc = reduce.getLoc();
  Region &first = reduce.getReductions()[0];
  size_t count = shares.size();
  bool together = count >= 2 && llvm::isPowerOf2_64(count) && count <= lanes &&
                  llvm::all_of(reduce.getReductions(), [&](Region &region) {
                    return OperationEquivalence::isRegionEquivalentTo(
                        &first, &region, OperationEquivalence::IgnoreLocations);
                  });
  if (!together)
    return llvm::map_to_vector(
        llvm::zip_equal(reduce.getReductions(), shares), [&](auto pair) {
          auto [region, vector] = pair;
          return combineLanes(b, loc, region.front(), vector, lanes);
        });
  KernelBuilder kb(b, loc);
  Value all = kb.combineEach(llvm::to_vector(shares), [&](Value x, Value y) {
    return combine(b, first.front(), x, y,
                   cast<VectorType>(x.getType()).getNumElements());
  });
  SmallVector<Value> results;
  for (size_t k = 0; k < count; ++k)
    results.push_back(
        vector::ExtractOp::create(b, loc, all, ArrayRef<int64_t>{int64_t(k)}));
  return results;
}

LogicalResult kvq::vectorizeLoop(PatternRewriter &rewriter,
                                 scf::ParallelOp loop, unsigned lanes,
                                 bool withRest, unsigned chunks,
                                 int64_t maxLoadStride,
                                 function_ref<void(Vectorizer &)> configure) {
  Location loc = loop.getLoc();
  std::optional<SmallVector<TypedAttr>> identities =
      getReductionIdentities(loop);
  if (!identities)
    return rewriter.notifyMatchFailure(loop, "a reduction of no identity");
  Value iv = loop.getInductionVars()[0];
  auto reduce = cast<scf::ReduceOp>(loop.getBody()->getTerminator());
  Vectorizer vectorizer(iv, lanes, maxLoadStride);
  if (configure)
    configure(vectorizer);
  if (!vectorizer.analyze(*loop.getBody()) ||
      llvm::is_contained(reduce.getOperands(), iv))
    return rewriter.notifyMatchFailure(loop, "body not elementwise");
  SmallVector<Value> shares;
  for (TypedAttr identity : *identities)
    shares.push_back(arith::ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(VectorType::get({lanes}, identity.getType()),
                               identity)));
  Value stepValue =
      arith::ConstantIndexOp::create(rewriter, loc, lanes * chunks);
  Value count = loop.getUpperBound()[0], vectorEnd = count;
  if (withRest)
    vectorEnd = arith::SubIOp::create(
        rewriter, loc, count,
        arith::RemUIOp::create(rewriter, loc, count, stepValue));
  auto vectorLoop = scf::ForOp::create(
      rewriter, loc, loop.getLowerBound()[0], vectorEnd, stepValue, shares,
      [&](OpBuilder &b, Location, Value first, ValueRange acc) {
        SmallVector<LaneChunk> lanesOf;
        for (unsigned k = 0; k < chunks; ++k)
          lanesOf.emplace_back(
              k == 0 ? first
                     : arith::AddIOp::create(
                           b, loc, first,
                           arith::ConstantIndexOp::create(b, loc, k * lanes)));
        vectorizer.widen(*loop.getBody(), b, lanesOf);
        SmallVector<Value> next(acc);
        for (LaneChunk &chunk : lanesOf)
          for (auto [k, value] : llvm::enumerate(reduce.getOperands()))
            next[k] = combine(b, reduce.getReductions()[k].front(), next[k],
                              broadcastTo(b, loc,
                                          chunk.mapping.lookupOrDefault(value),
                                          lanes),
                              lanes);
        scf::YieldOp::create(b, loc, next);
      });
  SmallVector<Value> all =
      combineEachLanes(rewriter, reduce, vectorLoop.getResults(), lanes);
  // Combined with the initial value, unless that is the identity the
  // shares started from: combining with it again changes nothing (a sum
  // from +0 is never -0).
  SmallVector<Value> results;
  for (auto [k, init] : llvm::enumerate(loop.getInitVals())) {
    Attribute start;
    if (matchPattern(init, m_Constant(&start)) && start == (*identities)[k]) {
      results.push_back(all[k]);
      continue;
    }
    results.push_back(combineByReduction(
        rewriter, reduce.getReductions()[k].front(), init, all[k]));
  }
  if (withRest) {
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    results =
        buildSerialLoop(rewriter, loop, vectorEnd, one, results).getResults();
  }
  rewriter.replaceOp(loop, results);
  return success();
}

bool kvq::isRunTimeLoop(scf::ParallelOp loop) {
  return loop.getNumLoops() == 1 &&
         matchPattern(loop.getLowerBound()[0], m_Zero()) &&
         matchPattern(loop.getStep()[0], m_One()) &&
         !matchPattern(loop.getUpperBound()[0], m_Constant());
}
