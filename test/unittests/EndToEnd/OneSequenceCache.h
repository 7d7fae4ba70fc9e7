//===- OneSequenceCache.h - A test cache on either backend ------*- C++ -*-===//
//
// Part of kvq, the end-to-end tests.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TEST_ENDTOEND_ONESEQUENCECACHE_H
#define KVQ_TEST_ENDTOEND_ONESEQUENCECACHE_H

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <random>

namespace kvq::test {

/// A cache of up to `sequences` sequences (`pages` pages a tensor) of the
/// artifact in `dir` on the CPU backend or on the PTX interpreter (sm_80);
/// null after a test failure where it cannot be made.
inline std::unique_ptr<runtime::Cache> makeTestCache(const std::string &dir,
                                                     bool interpreter,
                                                     unsigned pages,
                                                     unsigned sequences) {
  using namespace runtime;
  auto artifact = Artifact::open(dir);
  EXPECT_TRUE(artifact.ok()) << artifact.message();
  if (!artifact.ok())
    return nullptr;
  CacheOptions options;
  options.MaxSequences = sequences;
  options.PagesPerTensor = pages;
  auto create = [&]() -> Expected<std::unique_ptr<Cache>> {
    if (!interpreter)
      return Cache::create(*artifact, options);
    auto backend = createDeviceBackend(
        **artifact, std::make_unique<ptx::InterpDriver>(), "sm_80");
    if (!backend.ok())
      return backend.status();
    return Cache::create(*artifact, options, std::move(*backend));
  };
  Expected<std::unique_ptr<Cache>> cache = create();
  EXPECT_TRUE(cache.ok()) << cache.message();
  return cache.ok() ? std::move(*cache) : nullptr;
}

/// A one-sequence cache (8 pages a tensor) of the artifact in `dir`.
inline std::unique_ptr<runtime::Cache>
makeOneSequenceCache(const std::string &dir, bool interpreter) {
  return makeTestCache(dir, interpreter, /*pages=*/8, /*sequences=*/1);
}

/// `n` values drawn from N(0, 1) by `rng`: keys, values and queries.
inline std::vector<float> normalValues(std::mt19937 &rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float &value : values)
    value = normal(rng);
  return values;
}

} // namespace kvq::test

#endif // KVQ_TEST_ENDTOEND_ONESEQUENCECACHE_H
