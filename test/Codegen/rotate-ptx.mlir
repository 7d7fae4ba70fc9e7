// The PTX of Hadamard-rotated keys and values
// (test/unittests/Runtime/Specs/rot-kivi2-d64-gqa4.mlir, docs/Numerics.md,
// "Hadamard rotation"): each flush rotates its tokens in block-local memory
// in log2(64) = 6 butterfly stages between block barriers, one add.rn and
// one sub.rn each and no FMA; the keys' signs (rotate_seed = 7) are XORed
// into the first stage, each computed from the seed's bits (no table), and
// the scale 1/8 is the last stage's one multiply. The attend kernel rotates
// the query and takes the values' sums back with the same stages.
// RUN: rm -rf %t && kvq-opt %S/../unittests/Runtime/Specs/rot-kivi2-d64-gqa4.mlir --kvq-compile=%t -o /dev/null
// RUN: FileCheck %s --input-file=%t/kernels.sm_80.ptx
// RUN: FileCheck %s --check-prefix=NOFMA --input-file=%t/kernels.sm_80.ptx

// CHECK-NOT: hadamard_signs
// CHECK-LABEL: .entry rot_kivi2_d64_gqa4_attend_0(
// CHECK: mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3E000000;
// CHECK: mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3E000000;

// A channel's sign is bit c % 32 of a 32-bit half of splitmix64's first
// output from 7 (0x63cbe1e4'59320dd7: channels 0-2 negated, 3 not), the
// half chosen by bit 5 of c.
// CHECK-LABEL: .entry rot_kivi2_d64_gqa4_flush_keys_0(
// CHECK: selp.b32 {{%r[0-9]+}}, 1496452567, 1674306020, {{%p[0-9]+}};
// CHECK: bar.sync
// CHECK: xor.b32
// CHECK: add.rn.f32
// CHECK: sub.rn.f32
// CHECK: bar.sync
// CHECK-COUNT-4: sub.rn.f32
// CHECK: add.rn.f32 [[SUM:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT: mul.rn.f32 {{%r[0-9]+}}, [[SUM]], 0f3E000000;
// CHECK: sub.rn.f32 [[DIFF:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT: mul.rn.f32 {{%r[0-9]+}}, [[DIFF]], 0f3E000000;
// CHECK: bar.sync

// Values: no seed, no signs.
// CHECK-LABEL: .entry rot_kivi2_d64_gqa4_flush_values_0(
// CHECK-NOT: xor.b32
// CHECK: add.rn.f32
// CHECK: mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3E000000;

// NOFMA-LABEL: .entry rot_kivi2_d64_gqa4_attend_0(
// NOFMA: .entry rot_kivi2_d64_gqa4_flush_keys_0(
// NOFMA-NOT: fma
// NOFMA: .entry rot_kivi2_d64_gqa4_flush_values_0(
// NOFMA-NOT: fma
