//===- KernelBuilder.cpp - target-independent kernel emission -------------===//

#include "kvq/Codegen/KernelBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace kvq;

KernelTarget::~KernelTarget() = default;

void KernelTarget::prefetch(KernelBuilder &kb, Value ptr, Value byteOffset,
                            unsigned lines) {
  for (unsigned line = 0; line < lines; ++line)
    prefetchLine(
        kb, kb.gep(ptr, line ? kb.add(byteOffset, kb.i64(int64_t(line) * 64))
                             : byteOffset));
}
MatrixUnit::~MatrixUnit() = default;

MatrixUnitAttr MatrixUnit::getAttr(MLIRContext *ctx) {
  return MatrixUnitAttr::get(ctx, kM, kN, kK, Float16Type::get(ctx),
                             Float32Type::get(ctx));
}

Value KernelBuilder::i1(bool value) {
  return arith::ConstantIntOp::create(b, loc, b.getI1Type(), value);
}
Value KernelBuilder::i32(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}
Value KernelBuilder::i64(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}
Value KernelBuilder::f32(double value) {
  return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                        APFloat(static_cast<float>(value)));
}
Value KernelBuilder::f64(double value) {
  return arith::ConstantFloatOp::create(b, loc, b.getF64Type(), APFloat(value));
}

Value KernelBuilder::add(Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}
Value KernelBuilder::sub(Value x, Value y) {
  return arith::SubIOp::create(b, loc, x, y);
}
Value KernelBuilder::mul(Value x, Value y) {
  return arith::MulIOp::create(b, loc, x, y);
}
Value KernelBuilder::divU(Value x, Value y) {
  return arith::DivUIOp::create(b, loc, x, y);
}
Value KernelBuilder::remU(Value x, Value y) {
  return arith::RemUIOp::create(b, loc, x, y);
}
Value KernelBuilder::minU(Value x, Value y) {
  return arith::MinUIOp::create(b, loc, x, y);
}
Value KernelBuilder::maxS(Value x, Value y) {
  return arith::MaxSIOp::create(b, loc, x, y);
}
Value KernelBuilder::shl(Value x, Value y) {
  return arith::ShLIOp::create(b, loc, x, y);
}
Value KernelBuilder::shrU(Value x, Value y) {
  return arith::ShRUIOp::create(b, loc, x, y);
}
Value KernelBuilder::bitAnd(Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}
Value KernelBuilder::bitOr(Value x, Value y) {
  return arith::OrIOp::create(b, loc, x, y);
}
Value KernelBuilder::ult(Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
}
Value KernelBuilder::eq(Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y);
}
Value KernelBuilder::toI64(Value x) {
  return arith::ExtUIOp::create(b, loc, b.getI64Type(), x);
}
Value KernelBuilder::toI32(Value x) {
  return arith::TruncIOp::create(b, loc, b.getI32Type(), x);
}
Value KernelBuilder::select(Value cond, Value x, Value y) {
  return arith::SelectOp::create(b, loc, cond, x, y);
}

arith::FastMathFlagsAttr KernelBuilder::getFastMath() {
  auto flags = reassociate ? arith::FastMathFlags::reassoc |
                                 arith::FastMathFlags::contract
                           : arith::FastMathFlags::none;
  return arith::FastMathFlagsAttr::get(b.getContext(), flags);
}

Value KernelBuilder::fadd(Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y, getFastMath());
}
Value KernelBuilder::fsub(Value x, Value y) {
  return arith::SubFOp::create(b, loc, x, y, getFastMath());
}
Value KernelBuilder::fmul(Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y, getFastMath());
}
Value KernelBuilder::fdiv(Value x, Value y) {
  return arith::DivFOp::create(b, loc, x, y);
}
// minNum/maxNum semantics (PTX min.f32/max.f32); `arith` min/max would
// become libdevice calls on the GPU.
Value KernelBuilder::fmin(Value x, Value y) {
  return callIntrinsic("llvm.minnum", {x, y});
}
Value KernelBuilder::fmax(Value x, Value y) {
  return callIntrinsic("llvm.maxnum", {x, y});
}
Value KernelBuilder::selectMax(Value x, Value y) {
  return select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y),
                x, y);
}
Value KernelBuilder::selectMin(Value x, Value y) {
  return select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, y),
                x, y);
}
Value KernelBuilder::runningMin(Value acc, Value x) {
  return target && target->getInfo().minMaxNum ? fmin(acc, x)
                                               : selectMin(x, acc);
}
Value KernelBuilder::runningMax(Value acc, Value x) {
  return target && target->getInfo().minMaxNum ? fmax(acc, x)
                                               : selectMax(x, acc);
}
// Generic LLVM intrinsic calls rather than `math` ops: they lower to the
// exact PTX instructions (sqrt.rn.f32, cvt.rni.f32.f32, ex2.approx.f32) with
// no libdevice call, and GPU-to-NVVM leaves `llvm.call_intrinsic` alone.
Value KernelBuilder::callIntrinsic(StringRef name, ValueRange operands) {
  return LLVM::CallIntrinsicOp::create(b, loc, operands.front().getType(),
                                       b.getStringAttr(name), operands)
      .getResult(0);
}
Value KernelBuilder::fabs(Value x) { return callIntrinsic("llvm.fabs", x); }
Value KernelBuilder::exp2(Value x) {
  return target ? target->exp2(*this, x) : math::Exp2Op::create(b, loc, x);
}
Value KernelBuilder::fneg(Value x) { return arith::NegFOp::create(b, loc, x); }
Value KernelBuilder::sqrt(Value x) { return callIntrinsic("llvm.sqrt", x); }
Value KernelBuilder::roundEven(Value x) {
  return callIntrinsic("llvm.roundeven", x);
}
Value KernelBuilder::floor(Value x) { return callIntrinsic("llvm.floor", x); }
Value KernelBuilder::feq(Value x, Value y) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, y);
}
Value KernelBuilder::flt(Value x, Value y) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, y);
}
Value KernelBuilder::isNonFinite(Value x) {
  return arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::UGE, fabs(x),
      f32Like(x, std::numeric_limits<double>::infinity()));
}
Value KernelBuilder::anyLane(Value mask) {
  if (!isa<VectorType>(mask.getType()))
    return mask;
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::OR, mask);
}
/// `element` in the shape of `like` (scalar or vector).
static Type withShapeOf(Value like, Type element) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return vector.clone(element);
  return element;
}
Value KernelBuilder::uitofp(Value x) {
  return arith::UIToFPOp::create(b, loc, withShapeOf(x, b.getF32Type()), x);
}
Value KernelBuilder::sitofp(Value x) {
  return arith::SIToFPOp::create(b, loc, withShapeOf(x, b.getF32Type()), x);
}

Value KernelBuilder::splat(Value scalar, unsigned lanes) {
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, scalar.getType()), scalar);
}
Type KernelBuilder::shaped(Type element) {
  return lanes ? VectorType::get({lanes}, element) : element;
}
Value KernelBuilder::ci1(bool value) {
  return lanes ? splat(i1(value), lanes) : i1(value);
}
Value KernelBuilder::ci32(int64_t value) {
  return lanes ? splat(i32(value), lanes) : i32(value);
}
Value KernelBuilder::cf32(double value) {
  return lanes ? splat(f32(value), lanes) : f32(value);
}
Value KernelBuilder::cf64(double value) {
  return lanes ? splat(f64(value), lanes) : f64(value);
}

Value KernelBuilder::f32Like(Value like, double value) {
  auto vector = dyn_cast<VectorType>(like.getType());
  return vector ? splat(f32(value), vector.getNumElements()) : f32(value);
}
Value KernelBuilder::i32Like(Value like, int64_t value) {
  auto vector = dyn_cast<VectorType>(like.getType());
  return vector ? splat(i32(value), vector.getNumElements()) : i32(value);
}
Value KernelBuilder::vectorI32(ArrayRef<int32_t> values) {
  auto type = VectorType::get({int64_t(values.size())}, b.getI32Type());
  return arith::ConstantOp::create(b, loc, type,
                                   DenseIntElementsAttr::get(type, values));
}
Value KernelBuilder::shuffle(Value vector, ArrayRef<int64_t> mask) {
  return vector::ShuffleOp::create(b, loc, vector, vector, mask);
}
Value KernelBuilder::concat(ArrayRef<Value> vectors) {
  // Pairwise, so that each shuffle's operands are alike.
  SmallVector<Value> parts(vectors);
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (unsigned i = 0; i + 1 < parts.size(); i += 2) {
      int64_t n = cast<VectorType>(parts[i].getType()).getNumElements() +
                  cast<VectorType>(parts[i + 1].getType()).getNumElements();
      next.push_back(
          vector::ShuffleOp::create(b, loc, parts[i], parts[i + 1],
                                    llvm::to_vector(llvm::seq<int64_t>(0, n))));
    }
    if (parts.size() % 2)
      next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts.front();
}
Value KernelBuilder::reduceAdd(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, vector,
                                     arith::FastMathFlags::reassoc);
}
Value KernelBuilder::reduceMax(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF,
                                     vector, arith::FastMathFlags::nnan);
}
Value KernelBuilder::reduceMin(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MINNUMF,
                                     vector, arith::FastMathFlags::nnan);
}
Value KernelBuilder::combineVectors(ArrayRef<Value> vectors,
                                    function_ref<Value(Value, Value)> combine) {
  int64_t lanes = cast<VectorType>(vectors[0].getType()).getNumElements();
  assert(combinesEach(vectors.size(), lanes) &&
         "combineVectors: not a power of two of vectors, at most their lanes");
  // The low (high) halves of the `runs` runs of `run` lanes of two vectors
  // (the second's lanes numbered from `lanes`).
  auto halves = [&](int64_t runs, int64_t run, bool high) {
    SmallVector<int64_t> mask;
    for (int64_t v : {int64_t(0), lanes})
      for (int64_t r = 0; r < runs; ++r)
        for (int64_t i = 0; i < run / 2; ++i)
          mask.push_back(v + r * run + (high ? run / 2 : 0) + i);
    return mask;
  };
  SmallVector<Value> level(vectors);
  int64_t run = lanes;
  for (int64_t runs = 1; level.size() > 1; runs *= 2, run /= 2) {
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      Value low = vector::ShuffleOp::create(b, loc, level[i], level[i + 1],
                                            halves(runs, run, false));
      Value high = vector::ShuffleOp::create(b, loc, level[i], level[i + 1],
                                             halves(runs, run, true));
      next.push_back(combine(low, high));
    }
    level = std::move(next);
  }
  return level[0];
}
Value KernelBuilder::gatherLanes(ArrayRef<Value> vectors,
                                 ArrayRef<int64_t> picks) {
  assert(llvm::isPowerOf2_64(vectors.size()) &&
         "gatherLanes: not a power of two of vectors");
  if (vectors.size() == 1)
    return shuffle(vectors[0], picks);
  // Each level pairs its vectors. In the inputs pick r is lane picks[r];
  // in a later level's vectors, whose `width` entries of each pick are
  // contiguous and pick-major, entry j of pick r is lane r * width + j.
  SmallVector<Value> level(vectors);
  for (int64_t width = 1; level.size() > 1; width *= 2) {
    auto lane = [&](size_t r, int64_t j) {
      return width == 1 ? picks[r] : int64_t(r) * width + j;
    };
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      int64_t lowLanes = cast<VectorType>(level[i].getType()).getNumElements();
      SmallVector<int64_t> mask;
      for (size_t r = 0; r < picks.size(); ++r) {
        for (int64_t j = 0; j < width; ++j)
          mask.push_back(lane(r, j));
        for (int64_t j = 0; j < width; ++j)
          mask.push_back(lowLanes + lane(r, j));
      }
      next.push_back(
          vector::ShuffleOp::create(b, loc, level[i], level[i + 1], mask));
    }
    level = std::move(next);
  }
  return level[0];
}
Value KernelBuilder::foldRuns(Value all, int64_t run, int64_t downTo,
                              function_ref<Value(Value, Value)> combine) {
  int64_t lanes = cast<VectorType>(all.getType()).getNumElements();
  for (int64_t half = run / 2; half >= downTo; half /= 2) {
    SmallVector<int64_t> mask;
    for (int64_t i = 0; i < lanes; ++i)
      mask.push_back(i % run < half ? i + half : i);
    all = combine(all, shuffle(all, mask));
  }
  return all;
}
Value KernelBuilder::combineEach(ArrayRef<Value> vectors,
                                 function_ref<Value(Value, Value)> combine) {
  int64_t lanes = cast<VectorType>(vectors[0].getType()).getNumElements();
  int64_t count = vectors.size();
  int64_t run = lanes / count;
  Value all = foldRuns(combineVectors(vectors, combine), run, 1, combine);
  if (count == 1)
    return vector::ExtractOp::create(b, loc, all, ArrayRef<int64_t>{0});
  SmallVector<int64_t> firsts;
  for (int64_t r = 0; r < count; ++r)
    firsts.push_back(r * run);
  return shuffle(all, firsts);
}
void KernelBuilder::maskedStore(Value value, Value ptr, Value byteOffset,
                                Value mask, unsigned align) {
  LLVM::MaskedStoreOp::create(b, loc, value, gep(ptr, byteOffset), mask, align);
}
Value KernelBuilder::maskedLoad(VectorType type, Value ptr, Value byteOffset,
                                Value mask, unsigned align) {
  Value zero = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
  return LLVM::MaskedLoadOp::create(b, loc, type, gep(ptr, byteOffset), mask,
                                    zero, align);
}
Value KernelBuilder::fptosi(Value x) {
  return arith::FPToSIOp::create(b, loc, withShapeOf(x, b.getI32Type()), x);
}
Value KernelBuilder::extF64(Value x) {
  return arith::ExtFOp::create(b, loc, withShapeOf(x, b.getF64Type()), x);
}
Value KernelBuilder::bitcast(Type type, Value x) {
  // A scalar type names the element type of a vector's bitcast.
  if (!isa<VectorType>(type))
    type = withShapeOf(x, type);
  return arith::BitcastOp::create(b, loc, type, x);
}

Value KernelBuilder::gep(Value ptr, Value byteOffset) {
  return LLVM::GEPOp::create(b, loc, ptr.getType(), b.getI8Type(), ptr,
                             ValueRange{byteOffset});
}
Value KernelBuilder::load(Type type, Value ptr, Value byteOffset,
                          unsigned align, bool invariant) {
  return LLVM::LoadOp::create(b, loc, type, gep(ptr, byteOffset), align,
                              /*isVolatile=*/false, /*isNonTemporal=*/false,
                              invariant);
}

SmallVector<Value, 8> KernelBuilder::loadFloats16B(Type elementType, Value ptr,
                                                   Value index) {
  unsigned bytes = elementType.getIntOrFloatBitWidth() / 8;
  unsigned count = 16 / bytes;
  auto vectorType = VectorType::get({count}, elementType);
  Value vector = load(vectorType, ptr, mul(toI64(index), i64(bytes)), 16,
                      /*invariant=*/true);
  SmallVector<Value, 8> values;
  for (unsigned i = 0; i < count; ++i) {
    Value element = LLVM::ExtractElementOp::create(b, loc, vector, i32(i));
    values.push_back(
        elementType.isF32()
            ? element
            : arith::ExtFOp::create(b, loc, b.getF32Type(), element));
  }
  return values;
}

Value KernelBuilder::loadFloatVector(Type elementType, Value ptr, Value index,
                                     unsigned lanes, bool invariant,
                                     unsigned align) {
  unsigned bytes = elementType.getIntOrFloatBitWidth() / 8;
  Value vector =
      load(VectorType::get({lanes}, elementType), ptr,
           mul(toI64(index), i64(bytes)), align ? align : bytes, invariant);
  if (elementType.isF32())
    return vector;
  return arith::ExtFOp::create(b, loc, VectorType::get({lanes}, b.getF32Type()),
                               vector);
}

Value KernelBuilder::getGlobalTable(Operation *symbolTable, StringRef name,
                                    ArrayRef<int32_t> values, unsigned space) {
  if (!SymbolTable::lookupSymbolIn(symbolTable, name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&symbolTable->getRegion(0).front());
    auto type = LLVM::LLVMArrayType::get(b.getI32Type(), values.size());
    auto data = DenseIntElementsAttr::get(
        RankedTensorType::get({int64_t(values.size())}, b.getI32Type()),
        values);
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                           LLVM::Linkage::Internal, name, data,
                           /*alignment=*/16, space);
  }
  return LLVM::AddressOfOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), space), name);
}

SmallVector<Value, 4> KernelBuilder::loadWords4(Value ptr, Value byteOffset) {
  auto vectorType = VectorType::get({4}, b.getI32Type());
  Value vector = load(vectorType, ptr, byteOffset, 16, /*invariant=*/true);
  SmallVector<Value, 4> words;
  for (int i = 0; i < 4; ++i)
    words.push_back(LLVM::ExtractElementOp::create(b, loc, vector, i32(i)));
  return words;
}
void KernelBuilder::store(Value value, Value ptr, Value byteOffset,
                          unsigned align) {
  LLVM::StoreOp::create(b, loc, value, gep(ptr, byteOffset), align);
}

Value KernelBuilder::atomicAddU32(Value ptr, Value byteOffset, Value increment,
                                  LLVM::AtomicOrdering ordering) {
  return LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                                   gep(ptr, byteOffset), increment, ordering);
}

Value KernelBuilder::loadFloat(Type elementType, Value ptr, Value index,
                               bool invariant) {
  unsigned bytes = elementType.getIntOrFloatBitWidth() / 8;
  Value offset = mul(toI64(index), i64(bytes));
  Value value = load(elementType, ptr, offset, bytes, invariant);
  if (elementType.isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}
Value KernelBuilder::loadF32(Value ptr, Value index, bool invariant) {
  return load(b.getF32Type(), ptr, mul(toI64(index), i64(4)), 4, invariant);
}
void KernelBuilder::storeF32(Value value, Value ptr, Value index) {
  store(value, ptr, mul(toI64(index), i64(4)), 4);
}
Value KernelBuilder::loadU32(Value ptr, Value index, bool invariant) {
  return load(b.getI32Type(), ptr, mul(toI64(index), i64(4)), 4, invariant);
}

SmallVector<Value> KernelBuilder::forLoop(Value lb, Value ub, Value step,
                                          ValueRange init,
                                          const LoopBody &body) {
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, step, init,
      [&](OpBuilder &nested, Location, Value iv, ValueRange iterArgs) {
        SmallVector<Value> yielded = body(iv, iterArgs);
        scf::YieldOp::create(nested, loc, yielded);
      });
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value>
KernelBuilder::forLoopBatched(Value begin, Value end, unsigned stride,
                              unsigned batch, ValueRange init,
                              const LoopBody &batchBody, const LoopBody &body) {
  SmallVector<Value> acc(init.begin(), init.end());
  end = maxS(end, begin);
  if (batch > 1) {
    Value mainEnd = maxS(sub(end, i32((batch - 1) * stride)), begin);
    acc = forLoop(begin, mainEnd, i32(batch * stride), acc, batchBody);
    // The batched loop ran ceil((mainEnd - begin) / (batch x stride))
    // iterations.
    Value iterations = divU(add(sub(mainEnd, begin), i32(batch * stride - 1)),
                            i32(batch * stride));
    begin = add(begin, mul(iterations, i32(batch * stride)));
  }
  return forLoop(begin, maxS(end, begin), i32(stride), acc, body);
}

SmallVector<Value> KernelBuilder::forLoopInFlight(Value begin, Value end,
                                                  unsigned stride,
                                                  ValueRange init,
                                                  const LoopBody &body) {
  unsigned unroll = getTarget().getLoadsInFlight();
  return forLoopBatched(
      begin, end, stride, unroll, init,
      [&](Value index, ValueRange sums) {
        SmallVector<Value> next(sums.begin(), sums.end());
        for (unsigned u = 0; u < unroll; ++u)
          next = body(add(index, i32(u * stride)), next);
        return next;
      },
      body);
}

void KernelBuilder::forEach(Value lb, Value ub,
                            llvm::function_ref<void(Value)> body) {
  forLoop(lb, ub, i32(1), {}, [&](Value iv, ValueRange) {
    body(iv);
    return SmallVector<Value>();
  });
}

void KernelBuilder::ifThen(Value cond, llvm::function_ref<void()> thenBody) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  thenBody();
}

SmallVector<Value>
KernelBuilder::ifThenElse(Value cond, TypeRange types,
                          llvm::function_ref<SmallVector<Value>()> thenBody,
                          llvm::function_ref<SmallVector<Value>()> elseBody) {
  auto ifOp = scf::IfOp::create(
      b, loc, cond,
      [&](OpBuilder &nested, Location) {
        scf::YieldOp::create(nested, loc, thenBody());
      },
      [&](OpBuilder &nested, Location) {
        scf::YieldOp::create(nested, loc, elseBody());
      });
  assert(ifOp.getResultTypes() == types && "branches yield other types");
  return SmallVector<Value>(ifOp.getResults());
}
