//===- IntegerFactors.h - f32 factors rounded to integers -------*- C++ -*-===//
//
// The arithmetic of attention on a CPU's integer dots (docs/Numerics.md,
// "Attention on integer dots"), shared by the emitted i16 forms and the
// kernel programs' integer-dot forms: factors rounded against their largest
// magnitude to the dot unit's signed operands, `k` products of a factor and
// a code summed exactly into each i32 lane.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_INTEGERFACTORS_H
#define KVQ_CODEGEN_INTEGERFACTORS_H

#include "kvq/Codegen/KernelBuilder.h"

#include <cstdint>
#include <optional>

namespace kvq {

/// The integer dots of a `#kvq.dot` a CPU runs on 16 i32 lanes: each lane
/// adds `k` products of an unsigned code and a signed `bits`-bit factor.
/// AVX-512 VNNI's `vpdpwssd` (k = 2, 16 bits) and `vpdpbusd` (k = 4, 8
/// bits; the codes are its unsigned operand, so they must fit 8 bits).
struct IntegerDots {
  unsigned k;
  unsigned bits;

  /// The dots whose factors have `factorBits` bits, if one of the two above.
  static std::optional<IntegerDots> getForFactorBits(unsigned factorBits);
  /// The dots of `unit`, if it is one of the two above.
  static std::optional<IntegerDots> get(DotUnitAttr unit);
  /// Their `#kvq.dot`: `k` products of `bits`-bit operands into each of 16
  /// i32 lanes.
  DotUnitAttr getUnit(mlir::MLIRContext *ctx) const;
  /// The largest magnitude of a rounded factor: 2^(bits - 1) - 1.
  constexpr double getFactorMax() const {
    return double((1u << (bits - 1)) - 1);
  }
  /// Whether i32 sums of `terms` products of a rounded factor and a
  /// `codeBits`-bit code cannot overflow, and the codes fit the operands.
  bool sumsFit(uint64_t terms, unsigned codeBits) const;
  /// `factors` (f32, a scalar or a vector) times `toFactors`, rounded to
  /// nearest even, as integers of `bits` bits.
  mlir::Value round(KernelBuilder &kb, mlir::Value factors,
                    mlir::Value toFactors) const;
  /// The factor that maps `largest` (f32, >= 0) to getFactorMax(): 0 where
  /// it is 0, so that all-zero factors stay zeros.
  mlir::Value scaleToFactors(KernelBuilder &kb, mlir::Value largest) const;
  /// `acc` (16 i32 lanes) plus, in each lane, the products of the lane's
  /// `k` parts of `codes` and `factors` (vectors of 16 i32).
  mlir::Value dot(KernelBuilder &kb, mlir::Value acc, mlir::Value codes,
                  mlir::Value factors) const;
};

/// The i16 pair dots the emitted i16 forms are written for.
constexpr IntegerDots kI16PairDots{2, 16};
/// The largest i16 a factor is rounded to.
constexpr double kI16Max = kI16PairDots.getFactorMax();

inline bool sumsFitI32(uint64_t terms, unsigned bits) {
  return kI16PairDots.sumsFit(terms, bits);
}
inline mlir::Value roundToI16(KernelBuilder &kb, mlir::Value factors,
                              mlir::Value toI16) {
  return kI16PairDots.round(kb, factors, toI16);
}
inline mlir::Value scaleToI16(KernelBuilder &kb, mlir::Value largest) {
  return kI16PairDots.scaleToFactors(kb, largest);
}
inline mlir::Value dotI16PairsAVX512(KernelBuilder &kb, mlir::Value acc,
                                     mlir::Value x, mlir::Value y) {
  return kI16PairDots.dot(kb, acc, x, y);
}

} // namespace kvq

#endif // KVQ_CODEGEN_INTEGERFACTORS_H
