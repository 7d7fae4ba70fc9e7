//===- Rotation.h - Hadamard rotation of the kernels ------------*- C++ -*-===//
//
// `rotate = hadamard` (docs/Numerics.md, "Hadamard rotation"): one builder
// of its arithmetic for the emitted attend kernels (over pointers) and for
// kvq-expand-hadamard's forms of `kvq.hadamard` (over memrefs).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_ROTATION_H
#define KVQ_CODEGEN_ROTATION_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"

#include <optional>

namespace kvq {

/// R x (forward: signs, butterflies, scale) or R^T x (inverse: butterflies,
/// scale, signs).
enum class RotationDirection { Forward, Inverse };

/// Reads `lanes` consecutive channels from channel `c` of row `row` of the
/// unrotated rows as f32: a scalar for 1 lane, else a vector.
using RotationLoad = llvm::function_ref<mlir::Value(
    mlir::Value row, mlir::Value c, unsigned lanes)>;

/// Where a rotation reads its rows and keeps them, and how a block shares
/// its work. Elements of the rotated rows are i32 offsets (row * dim + c).
struct RotationMemory {
  /// The unrotated rows; may read the rotated rows themselves.
  RotationLoad load;
  /// The f32 at element `at` of the rotated rows.
  llvm::function_ref<mlir::Value(mlir::Value at)> loadRotated;
  /// Stores `x` (f32, or a vector of them) at element `at`.
  llvm::function_ref<void(mlir::Value x, mlir::Value at)> store;
  /// Runs `body(i)` for every i32 i in [0, count), the block's threads
  /// sharing the iterations; every thread sees their writes after it.
  llvm::function_ref<void(unsigned count,
                          llvm::function_ref<void(mlir::Value)> body)>
      parallelFor;
};

/// The lanes a rotation of rows of `dim` computes on for `info`'s target:
/// above 1 (a block of one thread with vector registers) a row at a time in
/// vectors of them, else 1: the block's threads share each stage's
/// butterflies.
unsigned getRotationLanes(const TargetInfo &info, unsigned dim);

/// Rotates `rows` rows of `dim` (a power of two) channels, in fp32 exactly
/// as docs/Numerics.md specifies, with the signs of `seed` (none: all +1),
/// in the form of `lanes` (getRotationLanes): the fast Walsh-Hadamard
/// transform's log2(dim) stages, the signs and the scale folded into the
/// first and last.
void rotateRows(KernelBuilder &kb, std::optional<unsigned> seed, unsigned dim,
                unsigned rows, RotationDirection direction, unsigned lanes,
                const RotationMemory &memory);

/// The same into `to` (block-local f32 rows of `dim`) by `quant`'s
/// rotation, in the form of kb's target. Ends with a block barrier.
void rotateRows(KernelBuilder &kb, QuantAttr quant, unsigned dim, unsigned rows,
                RotationDirection direction, mlir::Value to, RotationLoad load);

} // namespace kvq

#endif // KVQ_CODEGEN_ROTATION_H
