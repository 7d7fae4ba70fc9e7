//===- MatrixOps.h - Warp-level matrix instructions ------------*- C++ -*-===//
//
// The arithmetic and data movement of mma.sync and ldmatrix for a whole
// warp, on register fragments gathered by the executor: fragment layouts of
// the PTX ISA ("Matrix Fragments for mma.m16n8k*", "ldmatrix"), independent
// of registers, memory and scheduling.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_LIB_MATRIXOPS_H
#define KVQ_PTXINTERP_LIB_MATRIXOPS_H

#include "kvq/PTXInterp/Module.h"

namespace kvq::ptx {

/// One supported mma.sync.aligned.m16n8k<K>.row.col form: D = A * B + C
/// with A 16xK (row-major fragments), B Kx8 (column-major), C and D 16x8.
struct MmaShape {
  unsigned K = 16;
  /// f32 or s32; C has the same type.
  Type Acc = Type::F32;
  /// f16/bf16 (A and B equal) or s8/u8 (each on its own).
  Type A = Type::F16, B = Type::F16;
  /// .satfinite (integer forms): clamp to the int32 range instead of wrapping.
  bool Saturate = false;

  /// Registers per lane of each fragment.
  unsigned aRegs() const { return K * typeBits(A) / 64; }
  unsigned bRegs() const { return K * typeBits(B) / 128; }
  static constexpr unsigned AccRegs = 4;
};

/// Per-lane fragments: Frag[lane][register], 32-bit register contents.
using Fragment = uint32_t[32][4];

/// Validates a decoded form; returns an empty string or why it is not
/// supported.
std::string checkMmaShape(const MmaShape &S);

/// D = A * B + C for the warp. Floating point: every product is exact and
/// the K products and C are summed exactly, then rounded once to f32
/// (round to nearest even), so the result does not depend on summation
/// order. Integers: exact, wrapping modulo 2^32 (or saturating).
void mmaWarp(const MmaShape &S, const Fragment &A, const Fragment &B,
             const Fragment &C, Fragment &D);

/// ldmatrix.m8n8.x<Num>{.trans}.b16: Rows[8 * j + r] points at the 16 bytes
/// of row r of matrix j (given by lane 8 * j + r). Lane l receives in
/// register j row l / 4, columns 2 * (l % 4) and 2 * (l % 4) + 1 of matrix
/// j (of its transpose with Trans), the lower column in the low half.
void ldmatrixWarp(unsigned Num, bool Trans, const uint8_t *const Rows[32],
                  Fragment &D);

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_LIB_MATRIXOPS_H
