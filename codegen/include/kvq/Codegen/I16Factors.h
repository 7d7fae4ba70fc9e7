//===- I16Factors.h - f32 factors rounded to 16-bit integers ----*- C++ -*-===//
//
// The arithmetic of attention on 16-bit integer pair dots
// (docs/Numerics.md, "Attention on 16-bit integers"), shared by the
// emitted i16 forms and the kernel programs' pair-dot forms: factors
// rounded against their largest magnitude to i16, pairs of i16 products
// summed exactly into i32 lanes.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_I16FACTORS_H
#define KVQ_CODEGEN_I16FACTORS_H

#include "kvq/Codegen/KernelBuilder.h"

#include <cstdint>

namespace kvq {

/// The largest i16 a factor is rounded to.
constexpr double kI16Max = 32767;

/// Whether i32 sums of `terms` products of a rounded factor and a `bits`-bit
/// code cannot overflow.
inline bool sumsFitI32(uint64_t terms, unsigned bits) {
  return terms * uint64_t(kI16Max) * ((1u << bits) - 1) < (uint64_t(1) << 31);
}

/// `factors` (f32, a scalar or a vector) times `toI16`, rounded to nearest
/// even, as i16.
mlir::Value roundToI16(KernelBuilder &kb, mlir::Value factors,
                       mlir::Value toI16);

/// The factor that maps `largest` (f32, >= 0) to kI16Max: 0 where it is 0,
/// so that all-zero factors stay zeros.
mlir::Value scaleToI16(KernelBuilder &kb, mlir::Value largest);

/// `acc` (16 i32 lanes) plus, in each lane, the products of the lane's two
/// i16 halves of `x` and `y` (vectors of 16 i32): AVX-512 VNNI's
/// `vpdpwssd`, the i16 pair dot unit of 16 lanes.
mlir::Value dotI16PairsAVX512(KernelBuilder &kb, mlir::Value acc, mlir::Value x,
                              mlir::Value y);

} // namespace kvq

#endif // KVQ_CODEGEN_I16FACTORS_H
