// A target whose cpu_dot the host CPU lacks (vpdpwssd: AVX-512 VNNI) is a
// located error of the artifact writer (LLVM would abort selecting
// vpdpwssd).
// RUN: not kvq-opt %s --kvq-compile=%t -o /dev/null 2>&1 | FileCheck %s
// CHECK: i16-dots-host.mlir:[[# @LINE + 1]]:1: error: kvq.target has cpu_dot #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>, but host CPU 'x86-64-v4' has no such instruction
kvq.cache @avx512 model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 attributes {kvq.target = #kvq.target<host_cpu = "x86-64-v4", chips = ["sm_80"], warp_size = 32, block_threads = 128, split_tokens = 256, cpu_dot = #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>>} {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
