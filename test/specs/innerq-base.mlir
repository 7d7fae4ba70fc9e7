// The shipped spec parses, verifies, round-trips and reports its bits
// (InnerQ Table 3).
// RUN: kvq-opt %specs/innerq-base.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/innerq-base.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/innerq-base.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @innerq_base
// CHECK-NEXT:   code-bits = 3{{$}}
// CHECK-NEXT:   storage-bits = 3.5{{$}}
