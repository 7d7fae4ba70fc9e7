//===- Rotation.cpp - Hadamard rotation of the reference ------------------===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//

#include "kvq/Reference/Rotation.h"

#include "kvq/Support/Hadamard.h"

#include <cmath>

namespace kvq::ref {

namespace {

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

/// The unnormalised transform H x: log2(n) stages of n/2 butterflies, one
/// rounding per addition or subtraction.
template <typename T> void walshHadamard(T *x, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int j = 0; j < n; ++j) {
      if (j & h)
        continue;
      T a = x[j], b = x[j + h];
      x[j] = a + b;
      x[j + h] = a - b;
    }
}

} // namespace

std::string validate(const RotationConfig &rotation, int headDim) {
  if (!rotation.enabled)
    return rotation.seeded ? "a rotation seed needs a rotation" : "";
  if (!isPowerOfTwo(headDim))
    return "a Hadamard rotation needs head_dim a power of two";
  return "";
}

std::vector<float> rotationSigns(const RotationConfig &rotation, int n) {
  std::vector<float> signs(n, 1.0f);
  if (!rotation.seeded)
    return signs;
  std::vector<bool> negated = hadamard::negatedChannels(rotation.seed, n);
  for (int c = 0; c < n; ++c)
    if (negated[c])
      signs[c] = -1.0f;
  return signs;
}

float rotationScale(int n) { return hadamard::scale(n); }

void rotateForward(const RotationConfig &rotation, float *x, int n) {
  std::vector<float> signs = rotationSigns(rotation, n);
  for (int c = 0; c < n; ++c)
    x[c] = signs[c] < 0 ? -x[c] : x[c];
  walshHadamard(x, n);
  const float scale = rotationScale(n);
  for (int c = 0; c < n; ++c)
    x[c] = x[c] * scale;
}

void rotateInverse(const RotationConfig &rotation, float *x, int n) {
  walshHadamard(x, n);
  const float scale = rotationScale(n);
  std::vector<float> signs = rotationSigns(rotation, n);
  for (int c = 0; c < n; ++c) {
    float y = x[c] * scale;
    x[c] = signs[c] < 0 ? -y : y;
  }
}

void rotateInverse(const RotationConfig &rotation, double *x, int n) {
  walshHadamard(x, n);
  const double scale = 1.0 / std::sqrt(double(n));
  std::vector<float> signs = rotationSigns(rotation, n);
  for (int c = 0; c < n; ++c)
    x[c] = double(signs[c]) * (x[c] * scale);
}

} // namespace kvq::ref
