// The PTX of pre-RoPE keys (test/unittests/Runtime/Specs/prerope-d64-gqa4.mlir):
// the attend kernel reduces each angle by pi/2 in exact, uncontracted steps
// (docs/Numerics.md, "Pre-RoPE keys"), needs no libdevice call and no local
// memory, and the manifest marks the keys pre-RoPE and takes their rotation's
// style as the cache's channel order (the spec states none).
// RUN: rm -rf %t && kvq-opt %S/../unittests/Runtime/Specs/prerope-d64-gqa4.mlir --kvq-compile=%t -o /dev/null
// RUN: FileCheck %s --input-file=%t/kernels.sm_80.ptx --implicit-check-not=.local --implicit-check-not=call
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/manifest.json

// The frequency table, filled once per block.
// CHECK-LABEL: .entry prerope_d64_gqa4_attend_0(
// CHECK: st.shared.b32
// CHECK: bar.sync
// angle * 2/pi, rounded to the quadrant count k, then angle - k * pi/2 with
// pi/2 in four parts (1.5625 first), each a separate mul.rn and add.rn.
// CHECK:      mul.rn.f32 [[X:%r[0-9]+]], {{%r[0-9]+}}, 0f3F22F983;
// CHECK-NEXT: cvt.rni.f32.f32 [[K:%r[0-9]+]], [[X]];
// CHECK-NEXT: mul.rn.f32 [[P1:%r[0-9]+]], [[K]], 0fBFC80000;
// CHECK-NEXT: add.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[P1]];
// CHECK-NEXT: mul.rn.f32 {{%r[0-9]+}}, [[K]], 0fBC060000;

// MANIFEST-DAG: "version": 15
// MANIFEST-DAG: "channel_order": "interleaved"
// MANIFEST-DAG: "pre_rope": true
// MANIFEST-DAG: "pre_rope": false
