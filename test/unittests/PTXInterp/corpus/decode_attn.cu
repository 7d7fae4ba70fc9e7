// GQA decode-attention-like kernel: one block per kv-head, one warp per query
// head of the group. Each warp computes scores q.k over the context (lanes
// split the head dimension, 4 floats per lane with 128-bit loads), a softmax
// with shuffle max/sum and ex2.approx, and the weighted sum of values.
// Layout: q[h][128], k[kvh][ctx][128], v[kvh][ctx][128], out[h][128],
// scores: scratch [h][ctx].
extern "C" __global__ void decode_attn(const float *__restrict__ q,
                                       const float *__restrict__ k,
                                       const float *__restrict__ v,
                                       float *__restrict__ out,
                                       float *__restrict__ scores, int ctx,
                                       float scaleLog2e) {
  int kvh = blockIdx.x;
  int h = kvh * blockDim.y + threadIdx.y;
  int lane = threadIdx.x;
  const float4 q4 = ((const float4 *)(q + h * 128))[lane];
  const float *kb = k + (size_t)kvh * ctx * 128;
  const float *vb = v + (size_t)kvh * ctx * 128;
  float *sc = scores + (size_t)h * ctx;
  float m = -INFINITY;
  for (int j = 0; j < ctx; ++j) {
    float4 k4 = __ldg((const float4 *)(kb + (size_t)j * 128) + lane);
    float d = q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
    for (int o = 16; o > 0; o >>= 1)
      d += __shfl_xor_sync(0xffffffffu, d, o);
    d *= scaleLog2e;
    if (lane == 0)
      sc[j] = d;
    m = fmaxf(m, d);
  }
  __syncwarp();
  float sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int j = 0; j < ctx; ++j) {
    float p;
    asm("ex2.approx.f32 %0, %1;" : "=f"(p) : "f"(sc[j] - m));
    sum += p;
    float4 v4 = __ldg((const float4 *)(vb + (size_t)j * 128) + lane);
    acc.x += p * v4.x;
    acc.y += p * v4.y;
    acc.z += p * v4.z;
    acc.w += p * v4.w;
  }
  float inv = 1.f / sum;
  ((float4 *)(out + h * 128))[lane] =
      make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}
