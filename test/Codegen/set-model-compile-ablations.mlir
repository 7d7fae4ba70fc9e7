// kvq-eval's ablation specs, set to SmolLM2-135M's shape (30 layers, 9 query /
// 3 kv heads, head_dim 64) and clamped as kvq-eval clamps them, compile. One
// file of set-model-compile-*.mlir, split so that ctest runs them side by side.
// RUN: rm -rf %t && mkdir -p %t
// RUN: for spec in %S/../../python/tools/kvq-eval/specs/*.mlir; do \
// RUN:   kvq-opt $spec --kvq-set-model="layers=30 heads=9 kv_heads=3 head_dim=64 clamp-groups=true" -o %t/ablation.mlir || exit 1; \
// RUN:   kvq-opt %t/ablation.mlir --kvq-compile=%t/ablation-$(basename $spec .mlir) -o /dev/null || exit 1; \
// RUN: done
// RUN: grep -h '"head_dim"' %t/*/manifest.json | sort -u | FileCheck %s
// CHECK: "head_dim": 64,
// CHECK-NOT: "head_dim"
