// Shared-memory tiled transpose (32x32 tiles, 32x8 threads). `padded`
// avoids bank conflicts; `naive` has 32-way conflicts on the column read.
extern "C" __global__ void transpose_padded(const float *in, float *out,
                                            int w, int h) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < w && y + j < h)
      tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < h && y + j < w)
      out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void transpose_naive(const float *in, float *out, int w,
                                           int h) {
  __shared__ float tile[32][32];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Coalesced vs strided loads for the sector counters: thread t reads
// in[t * stride].
extern "C" __global__ void strided_copy(const float *in, float *out,
                                        int stride) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = in[t * stride];
}
