// The largest shapes the verifier accepts: 4096 layers x 4096 kv-heads,
// head_dim 16384, token groups of 16383 beside channel groups of 16384.
// Averaging over a common multiple of the group sizes overflowed 64 bits;
// each slice is now measured over its own group.
// RUN: kvq-opt %s --kvq-report-bits -o /dev/null | FileCheck %s
// Keys: ceil32(2 * 16383) / 16383 = 2.000122 code bits; values: 2 exactly.
// CHECK: code-bits = 2.00006
// CHECK: storage-bits = 2.00397
// CHECK: bytes(tokens = 4096) = 90206124376064004
// CHECK: full-precision = 18012199486226432

// A sequence whose bytes exceed 64 bits is an error, not a wrapped count.
// RUN: not kvq-opt %s --kvq-report-bits="tokens=10000000000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: error: the bytes of a sequence of 10000000000 tokens exceed 64 bits

kvq.cache @huge model <layers = 4096, heads = 4096, kv_heads = 4096, head_dim = 16384, dtype = f32> page 1048512 {
  kvq.keys window <recent = 0, flush = 16383> {
    kvq.layers 0 to 4096 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16383, params = f32>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 4096 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16384, params = f32>
  }
}
