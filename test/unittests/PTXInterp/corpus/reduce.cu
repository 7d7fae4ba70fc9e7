// Warp and block reductions: shuffles (down/xor/up/idx), vote, shared memory.
#include <cstdint>

__device__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ int warpMaxXor(int v) {
  for (int o = 16; o > 0; o >>= 1)
    v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// out[warp] = sum of in over the warp; maxOut[warp] = max; scan = inclusive
// prefix sum with shfl.up; bcast = value of lane 7 via shfl.idx; ballot.
extern "C" __global__ void warp_reduce(const float *in, const int *iin,
                                       float *out, int *maxOut, int *scan,
                                       int *bcast, unsigned *ballot) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int w = t >> 5;
  float s = warpSum(in[t]);
  int m = warpMaxXor(iin[t]);
  int x = iin[t];
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o)
      x += y;
  }
  scan[t] = x;
  bcast[t] = __shfl_sync(0xffffffffu, iin[t], 7);
  unsigned b = __ballot_sync(0xffffffffu, iin[t] > 0);
  if (lane == 0) {
    out[w] = s;
    maxOut[w] = m;
    ballot[w] = b;
  }
}

// One block sums n floats through shared memory (blockDim.x == 256).
extern "C" __global__ void block_reduce(const float *in, float *out, int n) {
  __shared__ float buf[256];
  float acc = 0.f;
  for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256)
    acc += in[i];
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = buf[0];
}
