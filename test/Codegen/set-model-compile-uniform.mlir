// Shipped schemes with uniform groups, set to SmolLM2-135M's shape (30 layers, 9 query / 3 kv heads,
// head_dim 64), compile. One file of set-model-compile-*.mlir, split so that
// ctest runs them side by side.
// RUN: rm -rf %t && mkdir -p %t
// RUN: for spec in fp16 kivi-2bit asymkv-16-0 asymkv-32-0; do \
// RUN:   kvq-opt %specs/$spec.mlir --kvq-set-model="layers=30 heads=9 kv_heads=3 head_dim=64 clamp-groups=true" -o %t/$spec.mlir || exit 1; \
// RUN:   kvq-opt %t/$spec.mlir --kvq-compile=%t/$spec -o /dev/null || exit 1; \
// RUN: done
// RUN: grep -h '"head_dim"' %t/*/manifest.json | sort -u | FileCheck %s
// CHECK: "head_dim": 64,
// CHECK-NOT: "head_dim"
