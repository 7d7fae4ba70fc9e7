// kvq-select-forms records on each attend kernel the forms of its loops on
// both targets, from the slice and the units of the cache's kvq.target
// (docs/Rationale.md, "Forms").
// RUN: kvq-opt %s --kvq-expand-schedule --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms | FileCheck %s

// KIVI-2 (2-bit span=tokens keys, span=channels values): with the i16 pair
// dot, the CPU takes the i16 forms; with the m16n8k16 matrix unit, the GPU
// takes the matrix forms.
// CHECK-LABEL: kvq.attend_kernel @units_attend_0 of @units layers [0]
// CHECK-SAME: cpu <keys = token_blocks_i16, values = channel_groups_i16>
// CHECK-SAME: gpu <keys = token_blocks_matrix, values = channel_groups_matrix>
kvq.cache @units model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// The same scheme on a target that lists no units: the generic vector
// forms on both.
// CHECK-LABEL: kvq.attend_kernel @no_units_attend_0
// CHECK-SAME: cpu <keys = token_blocks, values = channel_groups>
// CHECK-SAME: gpu <keys = token_blocks, values = channel_groups>
kvq.cache @no_units model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// A dot unit other than the i16 forms' (here i8 quads) is not theirs.
// CHECK-LABEL: kvq.attend_kernel @other_dot_attend_0
// CHECK-SAME: cpu <keys = token_blocks, values = channel_groups>
kvq.cache @other_dot model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 4, operands = i8, accumulator = i32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// InnerQ-style 3-bit span=channels keys and span=tokens values: the 3-bit
// field forms on the matrix unit; full-precision values read rows.
// CHECK-LABEL: kvq.attend_kernel @fields_attend_0 of @fields layers [0]
// CHECK-SAME: gpu <keys = channel_groups_matrix, values = token_blocks_matrix>
// CHECK-LABEL: kvq.attend_kernel @fields_attend_1 of @fields layers [1]
// CHECK-SAME: cpu <keys = channel_groups_i16, values = rows>
// CHECK-SAME: gpu <keys = channel_groups_matrix, values = rows>
kvq.cache @fields model <layers = 2, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 0, flush = 32> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32>
  }
  kvq.values window <recent = 0, flush = 32> {
    kvq.layer 0 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layer 1 : #kvq.full_precision
  }
}

// Pre-RoPE keys are rotated token by token on both targets.
// CHECK-LABEL: kvq.attend_kernel @pre_rope_attend_0
// CHECK-SAME: cpu <keys = pre_rope
// CHECK-SAME: gpu <keys = pre_rope
kvq.cache @pre_rope model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "native", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 64, style = half>>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
