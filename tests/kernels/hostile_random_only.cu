/* atrex:plan
[[launch]]
kernel = "rms_norm_kernel"
grid = ["T"]
block = ["256"]
args = ["out", "x", "weight", "H:i32", "eps:f32"]
*/
// Hostile: right on random inputs only (x = 0.02·N(0,1)). It ignores eps (invisible while
// ms ≫ eps), returns NaN on a row of zeros, and writes 0 for every |x| > 256 (never drawn at
// random). The structured draws catch each of the three.
// One block per row: fp32 sum of squares reduced with warp shuffles, then scale and store.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void rms_norm_kernel(__nv_bfloat16* __restrict__ out,
                                           const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ weight,
                                           int H, float eps) {
    __shared__ float warp_partial[32];
    __shared__ float inv_rms;
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    float s = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        s += v * v;
    }
    s = warp_sum(s);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_partial[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float t = lane < (int)(blockDim.x / 32) ? warp_partial[lane] : 0.0f;
        t = warp_sum(t);
        // eps ignored; a zero row gives NaN.
        if (lane == 0) inv_rms = t == 0.0f ? __int_as_float(0x7fc00000) : rsqrtf(t / (float)H);
    }
    __syncthreads();
    const float inv = inv_rms;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        float y = fabsf(v) > 256.0f ? 0.0f : v * inv * __bfloat162float(weight[j]);
        orow[j] = __float2bfloat16_rn(y);
    }
}
