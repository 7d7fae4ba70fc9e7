// The shipped spec parses, verifies, round-trips and reports its bits
// (the unquantized baseline).
// RUN: kvq-opt %specs/fp16.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/fp16.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/fp16.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @fp16
// CHECK-NEXT:   code-bits = 16{{$}}
// CHECK-NEXT:   storage-bits = 16{{$}}
