//===- IntegerFactors.cpp - f32 factors rounded to integers ---------------===//

#include "kvq/Codegen/IntegerFactors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

std::optional<IntegerDots> IntegerDots::getForFactorBits(unsigned factorBits) {
  // 32 bits a lane: 2 i16 products (vpdpwssd) or 4 i8 ones (vpdpbusd).
  if (factorBits == 16)
    return kI16PairDots;
  if (factorBits == 8)
    return IntegerDots{4, 8};
  return std::nullopt;
}

std::optional<IntegerDots> IntegerDots::get(DotUnitAttr unit) {
  if (!unit || !isa<IntegerType>(unit.getOperands()))
    return std::nullopt;
  std::optional<IntegerDots> dots =
      getForFactorBits(unit.getOperands().getIntOrFloatBitWidth());
  if (!dots || dots->getUnit(unit.getContext()) != unit)
    return std::nullopt;
  return dots;
}

DotUnitAttr IntegerDots::getUnit(MLIRContext *ctx) const {
  return DotUnitAttr::get(ctx, /*m=*/16, /*n=*/1, k,
                          IntegerType::get(ctx, bits),
                          IntegerType::get(ctx, 32));
}

bool IntegerDots::sumsFit(uint64_t terms, unsigned codeBits) const {
  // vpdpbusd takes the codes as unsigned bytes, vpdpwssd as signed i16.
  unsigned codeOperandBits = bits == 8 ? 8 : bits - 1;
  return codeBits <= codeOperandBits &&
         terms * uint64_t(getFactorMax()) * ((1u << codeBits) - 1) <
             (uint64_t(1) << 31);
}

Value IntegerDots::round(KernelBuilder &kb, Value factors,
                         Value toFactors) const {
  Value rounded = kb.fptosi(kb.roundEven(kb.fmul(factors, toFactors)));
  Type type = kb.builder().getIntegerType(bits);
  if (auto shape = dyn_cast<VectorType>(factors.getType()))
    type = VectorType::get(shape.getShape(), type);
  return arith::TruncIOp::create(kb.builder(), kb.getLoc(), type, rounded);
}

Value IntegerDots::scaleToFactors(KernelBuilder &kb, Value largest) const {
  Value zero = kb.f32Like(largest, 0);
  return kb.select(kb.flt(zero, largest),
                   kb.fdiv(kb.f32Like(largest, getFactorMax()), largest), zero);
}

Value IntegerDots::dot(KernelBuilder &kb, Value acc, Value codes,
                       Value factors) const {
  OpBuilder &b = kb.builder();
  auto parts = VectorType::get({16 * int64_t(k)}, b.getIntegerType(bits));
  auto asParts = [&](Value x) {
    return vector::BitCastOp::create(b, kb.getLoc(), parts, x);
  };
  // vpdpbusd multiplies its first operand's bytes as unsigned, the
  // second's as signed: the codes first.
  StringRef intrinsic = bits == 16 ? "llvm.x86.avx512.vpdpwssd.512"
                                   : "llvm.x86.avx512.vpdpbusd.512";
  return kb.callIntrinsic(intrinsic, {acc, asParts(codes), asParts(factors)});
}
