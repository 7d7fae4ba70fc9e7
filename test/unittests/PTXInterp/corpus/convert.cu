// f32 <-> f16 / bf16 / f8 (e4m3) conversions in every rounding mode.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

// out16[i*8 + k]: k = f16 rn, rz, rd, ru, bf16 rn, rz, rd, ru.
// out8[i]: e4m3 satfinite (rn). back[i*3 + k]: f16->f32, bf16->f32, e4m3->f32.
extern "C" __global__ void convert(const float *in, unsigned short *out16,
                                   unsigned char *out8, float *back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float x = in[i];
  __half h[4] = {__float2half_rn(x), __float2half_rz(x), __float2half_rd(x),
                 __float2half_ru(x)};
  __nv_bfloat16 b[4] = {__float2bfloat16_rn(x), __float2bfloat16_rz(x),
                        __float2bfloat16_rd(x), __float2bfloat16_ru(x)};
  for (int k = 0; k < 4; ++k) {
    out16[i * 8 + k] = __half_as_ushort(h[k]);
    out16[i * 8 + 4 + k] = __bfloat16_as_ushort(b[k]);
  }
  __nv_fp8_storage_t f8 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  out8[i] = f8;
  __half_raw hr = __nv_cvt_fp8_to_halfraw(f8, __NV_E4M3);
  back[i * 3 + 0] = __half2float(h[0]);
  back[i * 3 + 1] = __bfloat162float(b[0]);
  back[i * 3 + 2] = __half2float(__half(hr));
}
