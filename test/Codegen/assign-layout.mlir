// kvq-assign-layout attaches each cache's page layout as `kvq.layout`; the
// numbers are the manifest's (docs/KernelABI.md, "Page layout").
// RUN: kvq-opt %specs/kivi-2bit.mlir --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s --check-prefix=KIVI
// RUN: kvq-opt %specs/xquant-llama2-7b.mlir --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s --check-prefix=XQUANT
// RUN: kvq-opt %specs/innerq-small.mlir --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s --check-prefix=INNERQ
// RUN: kvq-opt %specs/ott-2bit.mlir --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s --check-prefix=OTT
// The attribute round-trips, and kvq-plan-kernels reads it.
// RUN: kvq-opt %specs/kivi-2bit.mlir --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | kvq-opt --kvq-plan-kernels | FileCheck %s --check-prefix=PLAN

// KIVI-2bit: 32 layers x 32 kv-heads of 2-bit asym codes, f16 scales and
// zero-points; 512 groups of 2 words per slice.
// KIVI: kvq.cache @kivi_2bit model
// KIVI-SAME: attributes {kvq.layout = #kvq.layout<page_tokens = 128, split_tokens = 512, split_granule = 32, dtype_bytes = 2,
// KIVI-SAME: keys = <window_capacity = 128, page_bytes = 6291456, slices = [
// KIVI-SAME: #kvq.slice_layout<offset = 0, slice_bytes = 6144, words_per_group = 2, groups_per_page = 512, param_bytes = 2, codes_bytes = 4096, scales_offset = 4096, zeros_offset = 5120>,
// KIVI-SAME: #kvq.slice_layout<offset = 196608, slice_bytes = 6144,
// KIVI-SAME: values = <window_capacity = 129, page_bytes = 6291456, slices = [
// KIVI-SAME: #kvq.slice_layout<offset = 0, slice_bytes = 6144, words_per_group = 2, groups_per_token = 4, groups_per_page = 512, param_bytes = 2, codes_bytes = 4096, scales_offset = 4096, zeros_offset = 5120>,

// XQuant: odd value layers from 29 on reuse the previous layer's codes and
// store only their scales and zero-points; the owner's codes are
// codes_layer_delta + h * codes_head_delta bytes away.
// XQUANT: values = <window_capacity = 129, page_bytes = 4063232, slices = [
// XQUANT-SAME: #kvq.slice_layout<offset = 3670016, slice_bytes = 4096, words_per_group = 1, groups_per_token = 4, groups_per_page = 512, param_bytes = 2, codes_bytes = 2048, scales_offset = 2048, zeros_offset = 3072>,
// XQUANT-SAME: #kvq.slice_layout<offset = 3801088, slice_bytes = 2048, words_per_group = 1, groups_per_token = 4, groups_per_page = 512, param_bytes = 2, zeros_offset = 1024, codes_from = 28, codes_layer_delta = -131072, codes_head_delta = 2048>,

// InnerQ: sym (no zero-points) 3-bit per-channel keys, whose key norms live
// outside the pages; 2-bit per-token values.
// INNERQ: keys = <window_capacity = 96, page_bytes = 1835008, slices = [
// INNERQ-SAME: #kvq.slice_layout<offset = 0, slice_bytes = 7168, words_per_group = 3, groups_per_token = 4, groups_per_page = 512, param_bytes = 2, codes_bytes = 6144, scales_offset = 6144>,
// INNERQ-SAME: values = <window_capacity = 127, page_bytes = 1310720, slices = [
// INNERQ-SAME: #kvq.slice_layout<offset = 0, slice_bytes = 5120, words_per_group = 2, groups_per_page = 512, param_bytes = 2, codes_bytes = 4096, scales_offset = 4096>,

// PLAN: kvq.flush_kernel @kivi_2bit_flush_keys_0 of @kivi_2bit keys

// OTT's pools: 3 + 32 entries per (layer >= 2, kv-head), each index 4
// header words and one position per entry.
// OTT: kvq.cache @ott_2bit model
// OTT-SAME: pool = <capacity = 3, extra = 32, first_layer = 2, entries = 35, index_words = 39>>
