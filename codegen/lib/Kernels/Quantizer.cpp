//===- Quantizer.cpp - the quantizer arithmetic of a scheme ---------------===//
//
// Operation order follows docs/Numerics.md exactly: fp32 with one rounding
// per operation, true division, round-to-nearest-even, no contraction.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Quantizer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace kvq;

Type Quantizer::getParamBitsType() {
  return kb.builder().getIntegerType(quant.getParamBits());
}

/// The f8E4M3FN value nearest to `x` (ties to even), saturating at +-448, as
/// f32: 3 mantissa bits in the normal range (exponent >= -6), multiples of
/// 2^-9 below it. LLVM has no 8-bit float type, so this is integer and f32
/// arithmetic, the same on every target.
static Value roundToE4M3(KernelBuilder &kb, Value x) {
  Type f32 = kb.builder().getF32Type();
  Value magnitude = kb.fabs(x);
  Value bits = kb.bitcast(kb.builder().getI32Type(), magnitude);
  // Round the f32 mantissa to 3 bits: add half an ulp (minus one, plus the
  // kept lowest bit for ties to even), then clear the dropped bits.
  Value keptLowBit = kb.bitAnd(kb.shrU(bits, kb.ci32(20)), kb.ci32(1));
  Value rounded = kb.bitAnd(kb.add(bits, kb.add(kb.ci32(0x7FFFF), keptLowBit)),
                            kb.ci32(~0xFFFFF));
  Value normal = kb.bitcast(f32, rounded);
  Value subnormal = kb.fmul(kb.roundEven(kb.fmul(magnitude, kb.cf32(512.0))),
                            kb.cf32(1.0 / 512.0));
  Value result =
      kb.select(kb.flt(magnitude, kb.cf32(1.0 / 64.0)), subnormal, normal);
  result = kb.fmin(result, kb.cf32(448.0));
  // x's sign bit, -0 included (hybrid marks asym groups with it).
  Type i32 = kb.builder().getI32Type();
  Value sign = kb.bitAnd(kb.bitcast(i32, x), kb.ci32(INT32_MIN));
  return kb.bitcast(f32, kb.bitOr(kb.bitcast(i32, result), sign));
}

/// The E4M3FN encoding of an f32 that is already an E4M3FN value.
static Value encodeE4M3(KernelBuilder &kb, Value value) {
  Value magnitude = kb.fabs(value);
  Value bits = kb.bitcast(kb.builder().getI32Type(), magnitude);
  Value exponent = kb.sub(kb.shrU(bits, kb.ci32(23)), kb.ci32(127 - 7));
  Value normal = kb.bitOr(kb.shl(exponent, kb.ci32(3)),
                          kb.bitAnd(kb.shrU(bits, kb.ci32(20)), kb.ci32(7)));
  Value subnormal = kb.fptosi(kb.fmul(magnitude, kb.cf32(512.0)));
  Value code =
      kb.select(kb.flt(magnitude, kb.cf32(1.0 / 64.0)), subnormal, normal);
  Value sign =
      kb.shrU(kb.bitcast(kb.builder().getI32Type(), value), kb.ci32(24));
  Value byte = kb.bitOr(kb.bitAnd(sign, kb.ci32(0x80)), code);
  return arith::TruncIOp::create(kb.builder(), kb.getLoc(),
                                 kb.shaped(kb.builder().getI8Type()), byte);
}

/// The f32 value of E4M3FN bits (never NaN: the quantizers do not make it).
static Value decodeE4M3(KernelBuilder &kb, Value byte) {
  Value bits = arith::ExtUIOp::create(
      kb.builder(), kb.getLoc(), kb.shaped(kb.builder().getI32Type()), byte);
  Value exponent = kb.bitAnd(kb.shrU(bits, kb.ci32(3)), kb.ci32(15));
  Value mantissa = kb.bitAnd(bits, kb.ci32(7));
  Value normal = kb.bitcast(
      kb.builder().getF32Type(),
      kb.bitOr(kb.shl(kb.add(exponent, kb.ci32(127 - 7)), kb.ci32(23)),
               kb.shl(mantissa, kb.ci32(20))));
  Value subnormal = kb.fmul(kb.uitofp(mantissa), kb.cf32(1.0 / 512.0));
  Value magnitude = kb.select(kb.eq(exponent, kb.ci32(0)), subnormal, normal);
  Value negative = kb.eq(kb.bitAnd(bits, kb.ci32(0x80)), kb.ci32(0x80));
  return kb.select(negative, kb.fneg(magnitude), magnitude);
}

static bool isE4M3(Type type) { return isa<Float8E4M3FNType>(type); }

Value Quantizer::roundParam(Value x) {
  Type type = quant.getParams();
  if (type.isF32())
    return x;
  if (isE4M3(type))
    return roundToE4M3(kb, x);
  // Saturate, then round: below the overflow threshold RNE gives the same
  // value, above it the largest finite value instead of an infinity.
  Value limit = kb.cf32(getMaxParam());
  Value clamped = kb.fmin(kb.fmax(x, kb.fneg(limit)), limit);
  OpBuilder &b = kb.builder();
  Value narrow =
      arith::TruncFOp::create(b, kb.getLoc(), kb.shaped(type), clamped);
  return arith::ExtFOp::create(b, kb.getLoc(), kb.shaped(b.getF32Type()),
                               narrow);
}

double Quantizer::getMaxParam() const {
  Type type = quant.getParams();
  if (isE4M3(type))
    return 448.0;
  return APFloat::getLargest(cast<FloatType>(type).getFloatSemantics())
      .convertToDouble();
}

Value Quantizer::exceedsParam(Value x) {
  if (quant.getParams().isF32())
    return kb.ci1(false);
  return kb.flt(kb.cf32(getMaxParam()), kb.fabs(x));
}

Value Quantizer::paramBits(Value rounded) {
  Type type = quant.getParams();
  if (type.isF32())
    return kb.bitcast(getParamBitsType(), rounded);
  if (isE4M3(type))
    return encodeE4M3(kb, rounded);
  Value narrow = arith::TruncFOp::create(kb.builder(), kb.getLoc(),
                                         kb.shaped(type), rounded);
  return kb.bitcast(getParamBitsType(), narrow);
}

Value Quantizer::paramFromBits(Value bits) {
  Type type = quant.getParams();
  if (isE4M3(type))
    return decodeE4M3(kb, bits);
  Value value = kb.bitcast(type, bits);
  if (type.isF32())
    return value;
  return arith::ExtFOp::create(kb.builder(), kb.getLoc(),
                               kb.shaped(kb.builder().getF32Type()), value);
}

Value Quantizer::signBit(Value x) {
  Type i32 = kb.builder().getI32Type();
  if (auto vector = dyn_cast<VectorType>(x.getType()))
    i32 = vector.clone(i32);
  Value bits = kb.bitcast(i32, x);
  return arith::CmpIOp::create(kb.builder(), kb.getLoc(),
                               arith::CmpIPredicate::slt, bits,
                               kb.i32Like(bits, 0));
}

Value Quantizer::applyClip(Value x) {
  if (clipFactor)
    return kb.fmul(clipFactor, x);
  std::optional<double> clip = quant.getUniformClip();
  if (!clip || *clip == 1.0)
    return x;
  return kb.fmul(kb.cf32(*clip), x);
}

GroupStats Quantizer::computeStats(Value size, ElementFn element) {
  bool asym = quant.getMode() != Mode::Sym, sym = quant.getMode() != Mode::Asym;
  float inf = std::numeric_limits<float>::infinity();
  SmallVector<Value> init;
  if (asym)
    init.append({kb.cf32(inf), kb.cf32(-inf)});
  if (sym)
    init.push_back(kb.cf32(0));
  SmallVector<Value> stats = kb.forLoop(
      kb.i32(0), size, kb.i32(1), init,
      [&](Value k, ValueRange acc) -> SmallVector<Value> {
        Value x = element(k);
        SmallVector<Value> next;
        if (asym)
          next.append({kb.runningMin(acc[0], x), kb.runningMax(acc[1], x)});
        if (sym)
          next.push_back(kb.runningMax(acc.back(), kb.fabs(x)));
        return next;
      });
  GroupStats result;
  if (asym) {
    result.min = stats[0];
    result.max = stats[1];
  }
  if (sym)
    result.absMax = stats.back();
  return result;
}

Quantizer::AsymParams Quantizer::asymFromRange(Value min, Value max) {
  // A zero of either sign counts as +0, whichever one the reduction kept.
  auto positiveZero = [&](Value v) {
    return kb.select(kb.feq(v, kb.cf32(0)), kb.cf32(0), v);
  };
  Value lo = applyClip(positiveZero(min));
  Value hi = applyClip(positiveZero(max));
  Value levels = kb.cf32(quant.getNumLevels() - 1);
  return {kb.fdiv(kb.fsub(hi, lo), levels), lo};
}

Value Quantizer::symFromMax(Value absMax) {
  Value maxCode = kb.cf32(getSymOffset() - 1);
  return kb.fdiv(applyClip(absMax), maxCode);
}

GroupParams Quantizer::paramsFromStats(const GroupStats &stats) {
  assert(quant.getMode() != Mode::Hybrid && "hybrid needs the elements");
  Value asymSaturated, symSaturated;
  return storedParams(stats, asymSaturated, symSaturated);
}

GroupParams Quantizer::storedParams(const GroupStats &stats,
                                    Value &asymSaturated, Value &symSaturated) {
  GroupParams params;
  Mode mode = quant.getMode();
  if (mode != Mode::Sym) {
    // Unrounded parameters; the stored ones are rounded once.
    AsymParams asym = asymFromRange(stats.min, stats.max);
    Value scale = asym.scale, zero = asym.zero;
    std::optional<double> eta = quant.getEtaValue();
    if (eta) {
      // Calibration in fp32 from the unrounded parameters, which codes come
      // from (docs/Numerics.md); constants folded once in fp64.
      Value kz = kb.cf32(static_cast<float>(*eta * (quant.getNumLevels() - 1)));
      Value ks = kb.cf32(static_cast<float>(1.0 - 2.0 * *eta));
      zero = kb.fadd(asym.zero, kb.fmul(kz, asym.scale));
      scale = kb.fmul(ks, asym.scale);
    }
    asymSaturated = kb.bitOr(exceedsParam(scale), exceedsParam(zero));
    params.scale = roundParam(scale);
    params.zero = roundParam(zero);
    params.asymScale = eta ? asym.scale : params.scale;
    params.asymZero = eta ? asym.zero : params.zero;
    params.saturated = asymSaturated;
  }
  if (mode == Mode::Asym)
    return params;
  Value symScale = symFromMax(stats.absMax);
  symSaturated = exceedsParam(symScale);
  params.symScale = roundParam(symScale);
  params.scale = params.symScale;
  params.zero = kb.cf32(0);
  params.saturated = symSaturated;
  return params;
}

GroupParams Quantizer::computeParams(unsigned size, ElementFn element) {
  return computeParams(kb.i32(size), element);
}

GroupParams Quantizer::computeParams(Value size, ElementFn element) {
  Value asymSaturated, symSaturated;
  GroupParams params =
      storedParams(computeStats(size, element), asymSaturated, symSaturated);
  if (quant.getMode() != Mode::Hybrid)
    return params;

  // Hybrid: keep the mode with the smaller squared error (tie: sym).
  SmallVector<Value> errors = kb.forLoop(
      kb.i32(0), size, kb.i32(1), {kb.cf64(0), kb.cf64(0)},
      [&](Value k, ValueRange acc) -> SmallVector<Value> {
        Value x = element(k);
        Value asymHat =
            asymValue(asymCode(x, params.asymScale, params.asymZero),
                      params.asymScale, params.asymZero);
        Value symHat = symValue(symCode(x, params.symScale), params.symScale);
        auto squaredError = [&](Value hat, Value sum) {
          Value e = kb.fsub(kb.extF64(x), kb.extF64(hat));
          return kb.fadd(sum, kb.fmul(e, e));
        };
        return {squaredError(asymHat, acc[0]), squaredError(symHat, acc[1])};
      });
  params.useAsym = kb.flt(errors[0], errors[1]);
  params.saturated = kb.select(params.useAsym, asymSaturated, symSaturated);
  params.scale =
      kb.select(params.useAsym, kb.fneg(params.asymScale), params.symScale);
  params.zero = kb.select(params.useAsym, params.asymZero, kb.cf32(0));
  return params;
}

Value Quantizer::asymCode(Value x, Value scale, Value zero) {
  Value levels = kb.cf32(quant.getNumLevels() - 1);
  Value q = kb.roundEven(kb.fdiv(kb.fsub(x, zero), scale));
  Value clamped = kb.fmax(kb.fmin(q, levels), kb.cf32(0));
  return kb.select(kb.feq(scale, kb.cf32(0)), kb.ci32(0), kb.fptosi(clamped));
}

Value Quantizer::symCode(Value x, Value scale) {
  Value maxCode = kb.cf32(getSymOffset() - 1);
  Value q = kb.roundEven(kb.fdiv(x, scale));
  Value clamped = kb.fmax(kb.fmin(q, maxCode), kb.fneg(maxCode));
  Value code =
      kb.select(kb.feq(scale, kb.cf32(0)), kb.ci32(0), kb.fptosi(clamped));
  return kb.add(code, kb.ci32(getSymOffset()));
}

Value Quantizer::computeCode(const GroupParams &params, Value x) {
  switch (quant.getMode()) {
  case Mode::Asym:
    return asymCode(x, params.asymScale, params.asymZero);
  case Mode::Sym:
    return symCode(x, params.symScale);
  case Mode::Hybrid:
    return kb.select(params.useAsym,
                     asymCode(x, params.asymScale, params.asymZero),
                     symCode(x, params.symScale));
  }
  llvm_unreachable("unknown mode");
}

Value Quantizer::asymValue(Value code, Value scale, Value zero) {
  return kb.fadd(kb.fmul(kb.sitofp(code), scale), zero);
}

Value Quantizer::symValue(Value code, Value scale) {
  return kb.fmul(kb.sitofp(kb.sub(code, kb.ci32(getSymOffset()))), scale);
}

Value Quantizer::dequantize(Value code, Value scale, Value zero) {
  switch (quant.getMode()) {
  case Mode::Asym:
    return asymValue(code, scale, zero);
  case Mode::Sym:
    return symValue(code, scale);
  case Mode::Hybrid:
    return kb.select(signBit(scale), asymValue(code, kb.fneg(scale), zero),
                     symValue(code, scale));
  }
  llvm_unreachable("unknown mode");
}

AffineTerms Quantizer::affine(Value scale, Value zero) {
  Value symZero = kb.fmul(kb.f32Like(scale, -double(getSymOffset())), scale);
  switch (quant.getMode()) {
  case Mode::Asym:
    return {scale, zero};
  case Mode::Sym:
    return {scale, symZero};
  case Mode::Hybrid: {
    Value asym = signBit(scale);
    return {kb.select(asym, kb.fneg(scale), scale),
            kb.select(asym, zero, symZero)};
  }
  }
  llvm_unreachable("unknown mode");
}

Value kvq::foldAffineDot(KernelBuilder &kb, const AffineTerms &terms,
                         Value codeDot, Value qSum) {
  return kb.fadd(kb.fmul(terms.slope, codeDot), kb.fmul(terms.offset, qSum));
}

Value Quantizer::foldedDot(Value scale, Value zero, Value codeDot, Value qSum) {
  return foldAffineDot(kb, affine(scale, zero), codeDot, qSum);
}
