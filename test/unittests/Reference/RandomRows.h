//===- RandomRows.h - random rows for the reference's tests -----*- C++ -*-===//

#ifndef KVQ_TEST_UNITTESTS_REFERENCE_RANDOMROWS_H
#define KVQ_TEST_UNITTESTS_REFERENCE_RANDOMROWS_H

#include <random>
#include <vector>

namespace kvq::ref::test {

/// n x d standard normal values from `seed`.
inline std::vector<float> normalRows(int n, int d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * d);
  for (float &v : x)
    v = normal(rng);
  return x;
}

} // namespace kvq::ref::test

#endif // KVQ_TEST_UNITTESTS_REFERENCE_RANDOMROWS_H
