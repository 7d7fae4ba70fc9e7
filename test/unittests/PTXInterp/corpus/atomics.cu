// Global and shared atomics: histogram, min/max, exchange, compare-and-swap.
extern "C" __global__ void atomics(const int *in, int n, int *hist,
                                   int *minmax, float *fsum, unsigned *cas,
                                   int *exch) {
  __shared__ int local[16];
  if (threadIdx.x < 16)
    local[threadIdx.x] = 0;
  __syncthreads();
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    int v = in[t];
    atomicAdd(&local[v & 15], 1);
    atomicMin(&minmax[0], v);
    atomicMax(&minmax[1], v);
    atomicAdd(fsum, 0.5f);
    // Each thread increments *cas once through a CAS loop.
    unsigned old = *(volatile unsigned *)cas, assumed;
    do {
      assumed = old;
      old = atomicCAS(cas, assumed, assumed + 1);
    } while (old != assumed);
    atomicExch(exch, t);
  }
  __syncthreads();
  if (threadIdx.x < 16)
    atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}
