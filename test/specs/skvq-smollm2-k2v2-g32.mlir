// kvq-calibrate's SKVQ spec for SmolLM2-135M parses, verifies (its
// permutation blob included), round-trips and reports its bits: the packed
// reorder's groups are whole words, so no padding over SKVQ's 2 + 2*8/32.
// Textual round trip only: MLIR's bytecode round trip renames resources.
// RUN: kvq-opt %specs/skvq-smollm2-k2v2-g32.mlir > %t.1.mlir
// RUN: kvq-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kvq-opt %specs/skvq-smollm2-k2v2-g32.mlir --kvq-report-bits -o /dev/null | FileCheck %s
// It compiles to one attend and two flush kernels for all 30 layers: their
// per-layer tables are rows of the kernels' tables, picked by tableRow.
// RUN: rm -rf %t.art && kvq-opt %specs/skvq-smollm2-k2v2-g32.mlir --kvq-compile=%t.art -o /dev/null
// RUN: grep -c '"kind": "attend"' %t.art/manifest.json | FileCheck %s --check-prefix=ATTEND
// RUN: grep -c '"kind": "flush"' %t.art/manifest.json | FileCheck %s --check-prefix=FLUSH
// ATTEND: 1
// FLUSH: 2

// CHECK:      kvq.cache @skvq_smollm2_k2v2_g32
// CHECK-NEXT:   code-bits = 2{{$}}
// CHECK-NEXT:   storage-bits = 2.5{{$}}
