// Channel reorder in the layout: groups of variable size start on 32-bit
// words, each kv-head's group words are recorded, and a layer's slices take
// the words of its largest kv-head, which the bit accounting reports.
// RUN: kvq-opt %s --pass-pipeline='builtin.module(kvq.cache(kvq-expand-schedule),kvq-assign-layout)' | FileCheck %s
// RUN: kvq-opt %s --kvq-report-bits -o /dev/null | FileCheck %s --check-prefix=BITS
// RUN: kvq-opt %s --kvq-compile=%t -o /dev/null && FileCheck %s --check-prefix=MANIFEST < %t/manifest.json

// Head 0: 2-bit groups of 16 take 1 word each (4); head 1: 10 and 22 codes
// take 1 and 2 words (5). Codes: 32 tokens x 5 words x 4 bytes = 640.
// CHECK: keys = <window_capacity = 0, page_bytes = {{[0-9]+}}, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 1152, groups_per_token = 4, groups_per_page = 128, param_bytes = 2, codes_bytes = 640, scales_offset = 640, zeros_offset = 896, words_per_token = 5, group_words = [0, 1, 2, 3, 0, 1, 3, 4]>]>
// The values' clip table changes no layout.
// CHECK-SAME: values = <{{.*}}words_per_group = 1, groups_per_token = 4,{{.*}}>]>

// Keys 5 x 32 / 64 = 2.5 code bits, values 2: 2.25 on average.
// BITS: code-bits = 2.25{{$}}

// MANIFEST: "reorder": {
// MANIFEST-NEXT: "perm": [
// MANIFEST: "slice": {
// MANIFEST: "group_words": [
// MANIFEST-NEXT: 0,
// MANIFEST-NEXT: 1,
// MANIFEST-NEXT: 2,
// MANIFEST-NEXT: 3,
// MANIFEST-NEXT: 0,
// MANIFEST-NEXT: 1,
// MANIFEST-NEXT: 3,
// MANIFEST-NEXT: 4
// MANIFEST-NEXT: ],
// MANIFEST: "words_per_token": 5
// MANIFEST: "clip_table": [
// MANIFEST-NEXT: [
// MANIFEST-NEXT: 0.5,
// MANIFEST-NEXT: 1,
// MANIFEST-NEXT: 0.75,
// MANIFEST-NEXT: 0.25

kvq.cache @reorder model <layers = 1, heads = 2, kv_heads = 2, head_dim = 64, dtype = f16> page 32 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16,
        reorder = #kvq.reorder<perm = dense<[[[63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0], [3, 8, 13, 18, 23, 28, 33, 38, 43, 48, 53, 58, 63, 4, 9, 14, 19, 24, 29, 34, 39, 44, 49, 54, 59, 0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 1, 6, 11, 16, 21, 26, 31, 36, 41, 46, 51, 56, 61, 2, 7, 12, 17, 22, 27, 32, 37, 42, 47, 52, 57, 62]]]> : tensor<1x2x64xi32>,
                               sizes = dense<[[[16, 16, 16, 16], [10, 22, 16, 16]]]> : tensor<1x2x4xi32>>>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16,
        clip = dense<[[[0.5, 1.0, 0.75, 0.25], [1.0, 1.0, 1.0, 0.5]]]> : tensor<1x2x4xf32>>
  }
}
