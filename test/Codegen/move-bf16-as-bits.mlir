// kvq-move-bf16-as-bits: a host module's loads and stores of bf16 values,
// scalars and vectors, move their bits as i16 (a bitcast at the value),
// keeping their attributes; other types are left alone. A host without
// bf16 registers would otherwise widen a loaded bf16 and round it back for
// the store through __truncsfbf2.
// RUN: kvq-opt %s --pass-pipeline='builtin.module(builtin.module(kvq-move-bf16-as-bits))' | FileCheck %s

module {
  // CHECK-LABEL: module @h
  module @h {
    // CHECK-LABEL: llvm.func @copy
    // CHECK: %[[ROW:.*]] = llvm.load %{{.*}} invariant {alignment = 32 : i64} : !llvm.ptr -> vector<16xi16>
    // CHECK: %[[ROWF:.*]] = llvm.bitcast %[[ROW]] : vector<16xi16> to vector<16xbf16>
    // CHECK: %[[WIDE:.*]] = llvm.fpext %[[ROWF]] : vector<16xbf16> to vector<16xf32>
    // CHECK: %[[ROWB:.*]] = llvm.bitcast %[[ROWF]] : vector<16xbf16> to vector<16xi16>
    // CHECK: llvm.store %[[ROWB]], %{{.*}} {alignment = 32 : i64} : vector<16xi16>, !llvm.ptr
    // CHECK: %[[ONE:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i16
    // CHECK: %[[ONEF:.*]] = llvm.bitcast %[[ONE]] : i16 to bf16
    // CHECK: %[[ONEB:.*]] = llvm.bitcast %[[ONEF]] : bf16 to i16
    // CHECK: llvm.store %[[ONEB]], %{{.*}} : i16, !llvm.ptr
    // CHECK: llvm.load %{{.*}} : !llvm.ptr -> vector<4xf16>
    // CHECK: llvm.store %{{.*}}, %{{.*}} : vector<4xf16>, !llvm.ptr
    llvm.func @copy(%src: !llvm.ptr, %dst: !llvm.ptr) -> vector<16xf32> {
      %row = llvm.load %src invariant {alignment = 32 : i64} : !llvm.ptr -> vector<16xbf16>
      %wide = llvm.fpext %row : vector<16xbf16> to vector<16xf32>
      llvm.store %row, %dst {alignment = 32 : i64} : vector<16xbf16>, !llvm.ptr
      %one = llvm.load %src : !llvm.ptr -> bf16
      llvm.store %one, %dst : bf16, !llvm.ptr
      %half = llvm.load %src : !llvm.ptr -> vector<4xf16>
      llvm.store %half, %dst : vector<4xf16>, !llvm.ptr
      llvm.return %wide : vector<16xf32>
    }
  }
}
