// Device-function calls: non-inlined callees with divergent callers, loops,
// a per-thread local array and warp shuffles inside the callee.

__device__ __noinline__ int collatzSteps(int N) {
  int Steps = 0;
  while (N > 1 && Steps < 1000) {
    N = (N & 1) ? 3 * N + 1 : N / 2;
    ++Steps;
  }
  return Steps;
}

__device__ __noinline__ int tableSum(int N) {
  int Table[16];
  for (int I = 0; I < 16; ++I)
    Table[I] = I * N;
  int S = 0;
  for (int I = 0; I < (N & 15); ++I)
    S += Table[(I * 7 + N) & 15];
  return S;
}

__device__ __noinline__ float warpSum(float V) {
  for (int O = 16; O > 0; O >>= 1)
    V += __shfl_xor_sync(0xffffffffu, V, O);
  return V;
}

extern "C" __global__ void calls(const int *In, int *Out, int *Tables,
                                 float *Sums) {
  int T = blockIdx.x * blockDim.x + threadIdx.x;
  int V = In[T];
  // Only some lanes call: the others wait at the reconvergence point.
  Out[T] = (T % 3 != 0) ? collatzSteps(V) : -1;
  Tables[T] = tableSum(V);
  Sums[T] = warpSum(static_cast<float>(V));
}
