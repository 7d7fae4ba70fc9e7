// The shipped spec parses, verifies, round-trips and reports its bits
// (KIVI-2 accounting at G = 128).
// RUN: kvq-opt %specs/ott-2bit.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/ott-2bit.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/ott-2bit.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @ott_2bit
// CHECK-NEXT:   code-bits = 2{{$}}
// CHECK-NEXT:   storage-bits = 2.25{{$}}
