// The shipped spec parses, verifies, round-trips and reports its bits
// (padding of variable-size groups: see the spec).
// Textual round trip only: MLIR's bytecode round trip renames resources.
// RUN: kvq-opt %specs/skvq-reorder-small.mlir > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/skvq-reorder-small.mlir --kvq-expand-schedule -o /dev/null
// RUN: kvq-opt %specs/skvq-reorder-small.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @skvq_reorder_small
// CHECK-NEXT:   code-bits = 2.0625{{$}}
// CHECK-NEXT:   storage-bits = 2.5625{{$}}
