//===- I16Factors.cpp - f32 factors rounded to 16-bit integers ------------===//

#include "kvq/Codegen/I16Factors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

Value kvq::roundToI16(KernelBuilder &kb, Value factors, Value toI16) {
  Value rounded = kb.fptosi(kb.roundEven(kb.fmul(factors, toI16)));
  Type i16 = kb.builder().getI16Type();
  if (auto type = dyn_cast<VectorType>(factors.getType()))
    i16 = VectorType::get(type.getShape(), i16);
  return arith::TruncIOp::create(kb.builder(), kb.getLoc(), i16, rounded);
}

Value kvq::scaleToI16(KernelBuilder &kb, Value largest) {
  Value zero = kb.f32Like(largest, 0);
  return kb.select(kb.flt(zero, largest),
                   kb.fdiv(kb.f32Like(largest, kI16Max), largest), zero);
}

Value kvq::dotI16PairsAVX512(KernelBuilder &kb, Value acc, Value x, Value y) {
  OpBuilder &b = kb.builder();
  auto halves = VectorType::get({32}, b.getI16Type());
  auto asHalves = [&](Value x) {
    return vector::BitCastOp::create(b, kb.getLoc(), halves, x);
  };
  return kb.callIntrinsic("llvm.x86.avx512.vpdpwssd.512",
                          {acc, asHalves(x), asHalves(y)});
}
