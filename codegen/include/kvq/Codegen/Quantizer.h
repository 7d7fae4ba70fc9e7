//===- Quantizer.h - the quantizer arithmetic of a scheme -------*- C++ -*-===//
//
// One builder for the arithmetic of docs/Numerics.md: parameter rounding,
// group parameters, codes and reconstruction. Every kernel on every target
// quantizes and dequantizes through it, so codes are bit-identical across
// backends (and, by construction, with the reference in test/lib/Reference).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_QUANTIZER_H
#define KVQ_CODEGEN_QUANTIZER_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"

namespace kvq {

/// The parameters of one group: what is stored, and what codes come from.
struct GroupParams {
  /// Stored scale and zero-point, rounded to the parameter dtype (f32
  /// values). Hybrid: a negative scale sign marks an asym group.
  mlir::Value scale, zero;
  /// Asym (uncalibrated) scale and zero-point that codes are computed from:
  /// the stored ones without eta, the unrounded fp32 ones with it.
  mlir::Value asymScale, asymZero;
  /// Sym scale that codes are computed from.
  mlir::Value symScale;
  /// Hybrid: true where the group keeps its asym codes.
  mlir::Value useAsym;
  /// i1: a stored parameter saturated at the dtype's largest finite value.
  mlir::Value saturated;
};

/// The reconstruction of a group as an affine map of its codes:
/// x = slope * c + offset (attention folds these into dot products).
struct AffineTerms {
  mlir::Value slope, offset;
};

/// sum_k q_k * (slope * c_k + offset) from `codeDot` = sum_k q_k c_k and
/// `qSum` = sum_k q_k: a group's dot with its reconstruction folded.
mlir::Value foldAffineDot(KernelBuilder &kb, const AffineTerms &terms,
                          mlir::Value codeDot, mlir::Value qSum);

/// What a group's parameters are computed from: the range (asym, hybrid)
/// and the largest magnitude (sym, hybrid), exact in any order.
struct GroupStats {
  mlir::Value min, max, absMax;
};

class Quantizer {
public:
  Quantizer(KernelBuilder &kb, QuantAttr quant) : kb(kb), quant(quant) {}

  /// Loads element k (an i32) of the group being quantized, as f32.
  using ElementFn = llvm::function_ref<mlir::Value(mlir::Value k)>;

  /// Computes the parameters of a group of `size` elements (an i32 value
  /// where group sizes vary: channel reorder).
  GroupParams computeParams(unsigned size, ElementFn element);
  GroupParams computeParams(mlir::Value size, ElementFn element);
  /// The statistics of a group of `size` elements, in index order.
  GroupStats computeStats(mlir::Value size, ElementFn element);
  /// Clips the groups quantized next with factor `factor` (f32: an entry
  /// of a per-group clip table) instead of the scheme's constant.
  void setClip(mlir::Value factor) { clipFactor = factor; }
  /// The parameters of an asym or sym group from its statistics, however
  /// they were reduced (hybrid also compares errors: computeParams).
  GroupParams paramsFromStats(const GroupStats &stats);
  /// The stored (unsigned) code of `x` in a group with `params`.
  mlir::Value computeCode(const GroupParams &params, mlir::Value x);
  /// The reconstruction of stored code `code` (i32) from stored parameters.
  mlir::Value dequantize(mlir::Value code, mlir::Value scale, mlir::Value zero);

  /// The reconstruction of stored parameters as x = slope * c + offset, up
  /// to rounding (attention only: codes never come from it). Scalars or
  /// vectors of groups.
  AffineTerms affine(mlir::Value scale, mlir::Value zero);
  /// sum_k q_k * dequantize(c_k) for one group, from `codeDot` = sum_k q_k c_k
  /// and `qSum` = sum_k q_k: the scale and zero-point are applied once per
  /// group instead of once per element.
  mlir::Value foldedDot(mlir::Value scale, mlir::Value zero,
                        mlir::Value codeDot, mlir::Value qSum);

  /// Rounds `x` to the parameter dtype, saturating at its largest finite
  /// value (store() of the numerics).
  mlir::Value roundParam(mlir::Value x);
  /// i1: `x` lies beyond the parameter dtype's finite range.
  mlir::Value exceedsParam(mlir::Value x);
  /// The parameter dtype's largest finite value.
  double getMaxParam() const;
  /// The raw bits of a rounded parameter, as an integer of its width.
  mlir::Value paramBits(mlir::Value rounded);
  /// A stored parameter from its raw bits, as f32.
  mlir::Value paramFromBits(mlir::Value bits);
  /// Integer type of the raw parameter bits.
  mlir::Type getParamBitsType();

  /// Offset that makes a signed sym code unsigned: 2^(b-1).
  int64_t getSymOffset() const { return int64_t(1) << (quant.getBits() - 1); }

private:
  struct AsymParams {
    mlir::Value scale, zero;
  };
  AsymParams asymFromRange(mlir::Value min, mlir::Value max);
  mlir::Value symFromMax(mlir::Value absMax);
  GroupParams storedParams(const GroupStats &stats, mlir::Value &asymSaturated,
                           mlir::Value &symSaturated);
  mlir::Value asymCode(mlir::Value x, mlir::Value scale, mlir::Value zero);
  mlir::Value symCode(mlir::Value x, mlir::Value scale);
  mlir::Value asymValue(mlir::Value code, mlir::Value scale, mlir::Value zero);
  mlir::Value symValue(mlir::Value code, mlir::Value scale);
  /// True where the sign bit of f32 `x` is set.
  mlir::Value signBit(mlir::Value x);
  mlir::Value applyClip(mlir::Value x);

  KernelBuilder &kb;
  QuantAttr quant;
  mlir::Value clipFactor;
};

} // namespace kvq

#endif // KVQ_CODEGEN_QUANTIZER_H
