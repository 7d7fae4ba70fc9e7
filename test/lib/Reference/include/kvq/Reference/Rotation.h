//===- Rotation.h - Hadamard rotation of the reference ----------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// `rotate = hadamard` (docs/Numerics.md, "Hadamard rotation"): each token's
// D channels are rotated by R = H * S / sqrt(D) before they are quantized,
// H the Sylvester-Hadamard matrix (H[i][j] = (-1)^popcount(i & j)) and S the
// diagonal of random signs of `rotate_seed` (the identity without a seed).
// R is orthonormal: R^T R = I.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_ROTATION_H
#define KVQ_REFERENCE_ROTATION_H

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::ref {

struct RotationConfig {
  bool enabled = false;
  /// A random-sign rotation: signs from `seed`.
  bool seeded = false;
  uint32_t seed = 0;
};

/// Empty if \p rotation is valid for rows of \p headDim channels, else why
/// not.
std::string validate(const RotationConfig &rotation, int headDim);

/// The sign of each of \p n channels (+1 or -1): all +1 without a seed;
/// otherwise channel c takes bit (c mod 64) of the (c / 64)-th output of
/// splitmix64 started at the seed, 1 meaning -1.
std::vector<float> rotationSigns(const RotationConfig &rotation, int n);

/// The scale 1/sqrt(n) rounded once to fp32 (fp64 sqrt and division).
float rotationScale(int n);

/// R x in place, in fp32 exactly as numerics.md specifies: signs, the
/// butterflies of the fast Walsh-Hadamard transform (stage h = 1, 2, ...,
/// n/2: x[j], x[j + h] <- x[j] + x[j + h], x[j] - x[j + h] for j with bit h
/// clear), then one fp32 multiplication by rotationScale(n).
void rotateForward(const RotationConfig &rotation, float *x, int n);

/// R^T x in place, in fp32: the butterflies, the scale, then the signs.
void rotateInverse(const RotationConfig &rotation, float *x, int n);

/// R^T x in place in fp64 (the same steps in fp64, the scale 1/sqrt(n) in
/// fp64): what the reference's attention uses.
void rotateInverse(const RotationConfig &rotation, double *x, int n);

} // namespace kvq::ref

#endif // KVQ_REFERENCE_ROTATION_H
