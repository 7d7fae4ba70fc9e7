// The shipped spec parses, verifies, round-trips and reports its bits
// (InnerQ Table 3).
// RUN: kvq-opt %specs/innerq-small.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/innerq-small.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/innerq-small.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @innerq_small
// CHECK-NEXT:   code-bits = 2.5{{$}}
// CHECK-NEXT:   storage-bits = 3{{$}}
