// The PTX of KIVI-2 has the structure docs/KernelABI.md promises.
// RUN: rm -rf %t && kvq-opt %specs/kivi-2bit.mlir --kvq-compile=%t -o /dev/null
// RUN: FileCheck %s --input-file=%t/kernels.sm_80.ptx --implicit-check-not=.local
// Kernels built as programs follow the emitted ones: each is checked alone.
// RUN: FileCheck %s --check-prefix=KEYS --input-file=%t/kernels.sm_80.ptx
// One PTX, for the oldest chip (sm_80), serves both default chips.
// RUN: not ls %t/kernels.sm_90.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/manifest.json
// RUN: FileCheck %s --check-prefix=FILES --input-file=%t/manifest.json

// CHECK: .target sm_80

// Quantization: IEEE division, round-to-nearest-even, f16 parameters, and no
// contraction into FMAs (codes are bit-exact with the reference).
// KEYS-LABEL: .entry kivi_2bit_flush_keys_0(
// KEYS-NOT: fma
// KEYS: ld.global.nc.b16
// KEYS: div.rn.f32
// KEYS: cvt.rn.f16.f32
// KEYS: cvt.rni.f32.f32
// KEYS: bar.sync
// KEYS-LABEL: .entry kivi_2bit_flush_values_0(
// KEYS-NOT: fma
// KEYS: div.rn.f32
// KEYS: cvt.rni.f32.f32

// Attention: inputs through the non-coherent cache, codes 128 bits at a
// time, softmax reductions with warp shuffles, exp2 in hardware.
// CHECK-LABEL: .entry kivi_2bit_attend_0(
// CHECK: ld.global.nc.v4.b32
// CHECK: shfl.sync.bfly.b32
// CHECK: ex2.approx
// CHECK: bar.sync
// The block counts itself after a device-scope fence; the last of its
// kv-head fences again, resets the counter and merges the splits, reading
// the other blocks' rows with plain (coherent) loads.
// CHECK: fence.acq_rel.gpu;
// CHECK-NEXT: atom.global.add.u32 [[ARRIVED:%r[0-9]+]], [[[COUNTER:%rd[0-9]+]]], 1;
// CHECK: fence.acq_rel.gpu;
// CHECK-NEXT: st.global.b32 [[[COUNTER]]], 0;
// CHECK: bar.sync
// CHECK-NOT: ld.global.nc
// CHECK: ld.global.b32
// CHECK: ex2.approx
// The flushes, programs, come last.
// CHECK-NOT: .entry
// CHECK: .entry kivi_2bit_flush_keys_0(
// CHECK-NOT: .entry
// CHECK: .entry kivi_2bit_flush_values_0(
// CHECK-NOT: .entry

// MANIFEST-DAG: "version": 15
// MANIFEST-DAG: "channel_order": "any"
// MANIFEST-DAG: "pre_rope": false
// MANIFEST-DAG: "name": "kivi_2bit"
// MANIFEST-DAG: "code_bits": 2
// MANIFEST-DAG: "storage_bits": 3
// FILES: "ptx": {
// FILES-NEXT: "sm_80": "kernels.sm_80.ptx"
// FILES-NEXT: }
// MANIFEST-DAG: "host_shared": "kernels.so"
// MANIFEST-DAG: "host_shared_fnv1a": "{{[0-9a-f]+}}"
