// The shipped spec parses, verifies, round-trips and reports its bits
// (AsymKV; XQuant appendix A).
// RUN: kvq-opt %specs/asymkv-32-0.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/asymkv-32-0.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/asymkv-32-0.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @asymkv_32_0
// CHECK-NEXT:   code-bits = 1.5{{$}}
// CHECK-NEXT:   storage-bits = 2.5{{$}}
