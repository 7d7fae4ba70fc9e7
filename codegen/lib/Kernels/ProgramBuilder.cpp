//===- ProgramBuilder.cpp - kernels built as programs over memrefs --------===//

#include "kvq/Codegen/ProgramBuilder.h"

#include "kvq/Codegen/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kvq;

MemRefType ProgramBuilder::getBufferType(Type element) {
  return MemRefType::get({ShapedType::kDynamic}, element);
}

func::FuncOp ProgramBuilder::createProgram(StringRef name,
                                           ArrayRef<Type> args) {
  OpBuilder &b = builder();
  program = func::FuncOp::create(b, getLoc(), name,
                                 b.getFunctionType(args, TypeRange{}));
  b.setInsertionPointToStart(program.addEntryBlock());
  return program;
}

Value ProgramBuilder::getBlockId(gpu::Dimension dim) {
  OpBuilder &b = builder();
  Value id = gpu::BlockIdOp::create(b, getLoc(), dim);
  return arith::IndexCastUIOp::create(b, getLoc(), b.getI32Type(), id);
}

Value ProgramBuilder::index(int64_t value) {
  return arith::ConstantIndexOp::create(builder(), getLoc(), value);
}

Value ProgramBuilder::toIndex(Value value) {
  if (value.getType().isIndex())
    return value;
  return arith::IndexCastUIOp::create(builder(), getLoc(),
                                      builder().getIndexType(), value);
}

Value ProgramBuilder::indexToI32(Value index) {
  return arith::IndexCastUIOp::create(builder(), getLoc(),
                                      builder().getI32Type(), index);
}

Value ProgramBuilder::row(Value buffer, Value offset, int64_t size) {
  OpBuilder &b = builder();
  return memref::SubViewOp::create(b, getLoc(), buffer,
                                   ArrayRef<OpFoldResult>{toIndex(offset)},
                                   ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
                                   ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

Value ProgramBuilder::loadElement(Value memref, Value at) {
  return memref::LoadOp::create(builder(), getLoc(), memref, toIndex(at));
}

Value ProgramBuilder::loadElementAsF32(Value memref, Value at) {
  return asF32(loadElement(memref, at));
}

Value ProgramBuilder::loadVectorAsF32(Value memref, Value at, int64_t count,
                                      unsigned alignment) {
  auto type = VectorType::get(
      {count}, cast<MemRefType>(memref.getType()).getElementType());
  return asF32(vector::LoadOp::create(
      builder(), getLoc(), type, memref, ValueRange{toIndex(at)},
      /*nontemporal=*/false, llvm::MaybeAlign(alignment)));
}

Value ProgramBuilder::dot(Value x, Value y) {
  return vector::ReductionOp::create(
      builder(), getLoc(), vector::CombiningKind::ADD, fmul(x, y),
      arith::FastMathFlags::reassoc | arith::FastMathFlags::contract);
}

Value ProgramBuilder::asF32(Value x) {
  Type f32 = builder().getF32Type();
  if (getElementTypeOrSelf(x.getType()) == f32)
    return x;
  Type type = f32;
  if (auto vector = dyn_cast<VectorType>(x.getType()))
    type = vector.clone(f32);
  return arith::ExtFOp::create(builder(), getLoc(), type, x);
}

void ProgramBuilder::storeElement(Value value, Value memref, Value at) {
  memref::StoreOp::create(builder(), getLoc(), value, memref, toIndex(at));
}

void ProgramBuilder::storeVector(Value value, Value memref, Value at) {
  vector::StoreOp::create(builder(), getLoc(), value, memref, toIndex(at));
}

void ProgramBuilder::atomicAdd(Value value, Value memref, Value at) {
  memref::AtomicRMWOp::create(builder(), getLoc(), arith::AtomicRMWKind::addi,
                              value, memref, toIndex(at));
}

Value ProgramBuilder::view(Value bytes, Value byteOffset, Type element,
                           int64_t count) {
  OpBuilder &b = builder();
  Value shift =
      arith::IndexCastUIOp::create(b, getLoc(), b.getIndexType(), byteOffset);
  return memref::ViewOp::create(b, getLoc(), MemRefType::get({count}, element),
                                bytes, shift, ValueRange{});
}

Value ProgramBuilder::loadConstant(StringRef name, Value index,
                                   function_ref<SmallVector<int32_t>()> build) {
  assert(program && "tables belong to a program made by createProgram");
  OpBuilder &b = builder();
  std::string symbol = (program.getName() + "_" + name).str();
  auto module = program->getParentOfType<ModuleOp>();
  auto global = module.lookupSymbol<memref::GlobalOp>(symbol);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(program);
    SmallVector<int32_t> values = build();
    auto type = MemRefType::get({int64_t(values.size())}, b.getI32Type());
    auto init = DenseIntElementsAttr::get(
        RankedTensorType::get(type.getShape(), b.getI32Type()),
        ArrayRef<int32_t>(values));
    global = memref::GlobalOp::create(b, getLoc(), symbol,
                                      b.getStringAttr("private"), type, init,
                                      /*constant=*/true, IntegerAttr());
  }
  Value table =
      memref::GetGlobalOp::create(b, getLoc(), global.getType(), symbol);
  return loadElement(table, index);
}

/// A 1-D memref of `count` elements in the workgroup address space.
static MemRefType getBlockLocalType(Type element, int64_t count) {
  return MemRefType::get(
      {count}, element, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(element.getContext(),
                                 gpu::AddressSpace::Workgroup));
}

Value ProgramBuilder::allocBlockLocal(Type element, int64_t count,
                                      unsigned alignment) {
  assert(alignment <= 16 && "the targets align block-local memory to 16");
  OpBuilder &b = builder();
  return memref::AllocaOp::create(
      b, getLoc(), getBlockLocalType(element, count), ValueRange{},
      alignment ? b.getI64IntegerAttr(alignment) : IntegerAttr());
}

Value ProgramBuilder::allocSplitLocal(Type element, int64_t perToken,
                                      Value splitTokens, unsigned alignment) {
  assert(alignment <= 16 && "the targets align block-local memory to 16");
  OpBuilder &b = builder();
  Value count =
      arith::MulIOp::create(b, getLoc(), toIndex(splitTokens), index(perToken));
  auto alloca = memref::AllocaOp::create(
      b, getLoc(), getBlockLocalType(element, ShapedType::kDynamic),
      ValueRange{count}, ValueRange{},
      alignment ? b.getI64IntegerAttr(alignment) : IntegerAttr());
  alloca->setAttr(kSplitLocalAttr, b.getI64IntegerAttr(perToken));
  return alloca;
}

void ProgramBuilder::parallelFor(int64_t count,
                                 function_ref<void(Value)> body) {
  parallelFor(index(count), body);
}

void ProgramBuilder::parallelFor(Value count, function_ref<void(Value)> body) {
  scf::ParallelOp::create(
      builder(), getLoc(), ValueRange{index(0)}, ValueRange{count},
      ValueRange{index(1)},
      [&](OpBuilder &, Location, ValueRange ivs) { body(ivs[0]); });
}

scf::ParallelOp ProgramBuilder::parallelReduce(
    Value count, ValueRange inits, function_ref<SmallVector<Value>(Value)> body,
    function_ref<Value(unsigned, Value, Value)> combine) {
  OpBuilder &b = builder();
  auto loop = scf::ParallelOp::create(b, getLoc(), ValueRange{index(0)},
                                      ValueRange{count}, ValueRange{index(1)},
                                      inits, nullptr);
  OpBuilder::InsertionGuard guard(b);
  // The reduction below is the body's terminator.
  if (!loop.getBody()->empty())
    loop.getBody()->getTerminator()->erase();
  b.setInsertionPointToEnd(loop.getBody());
  auto reduce =
      scf::ReduceOp::create(b, getLoc(), body(loop.getInductionVars()[0]));
  // Each combiner's block (with its two arguments) exists already.
  for (auto [k, region] : llvm::enumerate(reduce.getReductions())) {
    Block *combiner = &region.front();
    b.setInsertionPointToEnd(combiner);
    scf::ReduceReturnOp::create(
        b, getLoc(),
        combine(k, combiner->getArgument(0), combiner->getArgument(1)));
  }
  return loop;
}

std::pair<Value, ValueRange> kvq::getMemRefAccess(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return {load.getMemRef(), load.getIndices()};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return {store.getMemRef(), store.getIndices()};
  return {};
}

std::optional<int64_t> kvq::getParallelTripCount(Operation *op,
                                                 bool withReductions) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  APInt lower, upper, step;
  if (!loop || loop.getNumLoops() != 1 ||
      (loop.getNumResults() != 0 && !withReductions) ||
      !matchPattern(loop.getLowerBound()[0], m_ConstantInt(&lower)) ||
      !matchPattern(loop.getUpperBound()[0], m_ConstantInt(&upper)) ||
      !matchPattern(loop.getStep()[0], m_ConstantInt(&step)) ||
      !lower.isZero() || !step.isOne())
    return std::nullopt;
  return upper.getSExtValue();
}

bool kvq::isArithmetic(Operation *op) {
  return isMemoryEffectFree(op) || isa<LLVM::CallIntrinsicOp>(op) ||
         op->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
}

/// The kind of a combiner that is one op of its arguments `a` and `b`, or
/// compare and select between them (the kernels' running extrema).
static std::optional<arith::AtomicRMWKind> getCombinerKind(Block &combiner) {
  using Kind = arith::AtomicRMWKind;
  Value a = combiner.getArgument(0), b = combiner.getArgument(1);
  Operation *result = combiner.getTerminator()->getOperand(0).getDefiningOp();
  if (!result || result->getBlock() != &combiner)
    return std::nullopt;
  auto ofBoth = [&](Value x, Value y) {
    return (x == a && y == b) || (x == b && y == a);
  };
  if (auto select = dyn_cast<arith::SelectOp>(result)) {
    auto compare = select.getCondition().getDefiningOp<arith::CmpFOp>();
    if (!compare || !ofBoth(select.getTrueValue(), select.getFalseValue()) ||
        compare.getLhs() != select.getTrueValue() ||
        compare.getRhs() != select.getFalseValue() ||
        combiner.getOperations().size() != 3)
      return std::nullopt;
    switch (compare.getPredicate()) {
    case arith::CmpFPredicate::OGT:
    case arith::CmpFPredicate::OGE:
      return Kind::maximumf;
    case arith::CmpFPredicate::OLT:
    case arith::CmpFPredicate::OLE:
      return Kind::minimumf;
    default:
      return std::nullopt;
    }
  }
  if (combiner.getOperations().size() != 2 || result->getNumOperands() != 2 ||
      !ofBoth(result->getOperand(0), result->getOperand(1)))
    return std::nullopt;
  return llvm::TypeSwitch<Operation *, std::optional<Kind>>(result)
      .Case([](arith::AddFOp) { return Kind::addf; })
      .Case([](arith::AddIOp) { return Kind::addi; })
      .Case([](arith::MulFOp) { return Kind::mulf; })
      .Case([](arith::MulIOp) { return Kind::muli; })
      .Case([](arith::MaxNumFOp) { return Kind::maxnumf; })
      .Case([](arith::MinNumFOp) { return Kind::minnumf; })
      .Case([](arith::MaximumFOp) { return Kind::maximumf; })
      .Case([](arith::MinimumFOp) { return Kind::minimumf; })
      .Case([](arith::MaxSIOp) { return Kind::maxs; })
      .Case([](arith::MinSIOp) { return Kind::mins; })
      .Case([](arith::MaxUIOp) { return Kind::maxu; })
      .Case([](arith::MinUIOp) { return Kind::minu; })
      .Case([](arith::AndIOp) { return Kind::andi; })
      .Case([](arith::OrIOp) { return Kind::ori; })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<SmallVector<TypedAttr>>
kvq::getReductionIdentities(Operation *op) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  if (!loop)
    return std::nullopt;
  auto reduce = cast<scf::ReduceOp>(loop.getBody()->getTerminator());
  OpBuilder b(op->getContext());
  SmallVector<TypedAttr> identities;
  for (auto [region, result] :
       llvm::zip_equal(reduce.getReductions(), loop.getResults())) {
    std::optional<arith::AtomicRMWKind> kind = getCombinerKind(region.front());
    if (!kind || !result.getType().isIntOrFloat())
      return std::nullopt;
    identities.push_back(
        arith::getIdentityValueAttr(*kind, result.getType(), b, op->getLoc()));
  }
  return identities;
}

Value kvq::combineByReduction(OpBuilder &b, Block &combiner, Value x, Value y) {
  IRMapping mapping;
  mapping.map(combiner.getArgument(0), x);
  mapping.map(combiner.getArgument(1), y);
  for (Operation &op : combiner.without_terminator())
    b.clone(op, mapping);
  return mapping.lookup(combiner.getTerminator()->getOperand(0));
}

SmallVector<Value> kvq::cloneIteration(OpBuilder &b, scf::ParallelOp loop,
                                       IRMapping &mapping, ValueRange acc) {
  for (Operation &op : loop.getBody()->without_terminator())
    if (op.getNumResults() == 0 || !mapping.contains(op.getResult(0)))
      b.clone(op, mapping);
  auto reduce = cast<scf::ReduceOp>(loop.getBody()->getTerminator());
  SmallVector<Value> next;
  for (auto [k, value] : llvm::enumerate(reduce.getOperands()))
    next.push_back(combineByReduction(b, reduce.getReductions()[k].front(),
                                      acc[k], mapping.lookupOrDefault(value)));
  return next;
}

scf::ForOp kvq::buildSerialLoop(OpBuilder &b, scf::ParallelOp loop, Value first,
                                Value stride, ValueRange inits,
                                const IRMapping &outer) {
  Location loc = loop.getLoc();
  return scf::ForOp::create(
      b, loc, first, outer.lookupOrDefault(loop.getUpperBound()[0]), stride,
      inits, [&](OpBuilder &b, Location, Value iv, ValueRange acc) {
        IRMapping mapping = outer;
        mapping.map(loop.getInductionVars()[0], iv);
        scf::YieldOp::create(b, loc, cloneIteration(b, loop, mapping, acc));
      });
}

std::optional<LoopAroundReduction>
kvq::getLoopAroundReduction(scf::ParallelOp outer) {
  std::optional<int64_t> count = getParallelTripCount(outer);
  if (!count || outer->getParentOfType<scf::ParallelOp>())
    return std::nullopt;
  Block *body = outer.getBody();
  scf::ParallelOp inner;
  for (Operation &op : body->without_terminator()) {
    auto loop = dyn_cast<scf::ParallelOp>(op);
    if (loop && !inner) {
      inner = loop;
      continue;
    }
    bool nested = false;
    op.walk([&](scf::ParallelOp) { nested = true; });
    if (nested || (!inner && (op.getNumRegions() ||
                              !(isArithmetic(&op) || isa<memref::LoadOp>(op)))))
      return std::nullopt;
  }
  if (!inner || inner.getNumLoops() != 1 || inner.getNumResults() == 0)
    return std::nullopt;
  // The forms make the two loops one thread's or lanes' work: a parallel
  // loop deeper inside would lose the loop around it.
  WalkResult deeper = inner.getBody()->walk(
      [](scf::ParallelOp) { return WalkResult::interrupt(); });
  if (deeper.wasInterrupted())
    return std::nullopt;
  return LoopAroundReduction{*count, inner};
}
