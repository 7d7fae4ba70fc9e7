// Divergent loops and nested divergence with a warp-synchronous step after
// reconvergence.
extern "C" __global__ void divergent_loops(const int *trip, int *out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int n = trip[t];
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    if ((i + t) % 3 == 0) {
      acc += i * 7;
      if (t & 1) {
        for (int k = 0; k < (t & 7); ++k)
          acc ^= k << (i & 15);
      } else {
        acc -= t;
      }
    } else if (i % 5 == 1) {
      acc = acc * 3 + 1;
      continue;
    }
    if (acc > 100000)
      break;
  }
  // After reconvergence the whole warp exchanges values.
  int other = __shfl_xor_sync(0xffffffffu, acc, 1);
  out[t] = acc + (other & 0xff);
}
