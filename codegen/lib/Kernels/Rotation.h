//===- Rotation.h - Hadamard rotation of the kernels ------------*- C++ -*-===//
//
// Private to lib/Kernels: `rotate = hadamard` (docs/Numerics.md, "Hadamard
// rotation"), one builder for the flush and attend kernels on both targets.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LIB_KERNELS_ROTATION_H
#define KVQ_CODEGEN_LIB_KERNELS_ROTATION_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"

namespace kvq {

/// R x (forward: signs, butterflies, scale) or R^T x (inverse: butterflies,
/// scale, signs).
enum class RotationDirection { Forward, Inverse };

/// Reads `lanes` consecutive channels from channel `c` of row `row` of the
/// unrotated rows as f32: a scalar for 1 lane, else a vector.
using RotationLoad = llvm::function_ref<mlir::Value(
    mlir::Value row, mlir::Value c, unsigned lanes)>;

/// Rotates `rows` rows of `dim` (a power of two) channels by `quant`'s
/// rotation, in fp32 exactly as docs/Numerics.md specifies, into `to`
/// (block-local f32, rows of `dim`) with the fast Walsh-Hadamard
/// transform's log2(dim) stages. `load` may read `to` itself. Ends with a
/// block barrier.
void rotateRows(KernelBuilder &kb, QuantAttr quant, unsigned dim, unsigned rows,
                RotationDirection direction, mlir::Value to, RotationLoad load);

} // namespace kvq

#endif // KVQ_CODEGEN_LIB_KERNELS_ROTATION_H
