// The shipped spec parses, verifies, round-trips and reports its bits
// (XQuant Tables 2 and 8 ("1.4")).
// RUN: kvq-opt %specs/xquant-llama2-7b.mlir -verify-roundtrip > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/xquant-llama2-7b.mlir --kvq-expand-schedule -verify-roundtrip -o /dev/null
// RUN: kvq-opt %specs/xquant-llama2-7b.mlir --kvq-report-bits -o /dev/null | FileCheck %s

// CHECK:      kvq.cache @xquant_llama2_7b
// CHECK-NEXT:   code-bits = 1.40625{{$}}
// CHECK-NEXT:   storage-bits = 2.40625{{$}}
