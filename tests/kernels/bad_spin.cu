// Deliberately bad: never returns.
/* atrex:plan
[[launch]]
kernel = "rms_norm_ref"
grid = ["T"]
block = [256]
args = ["out", "x", "weight", "H:i32", "eps:f32"]
*/
// Reference RMSNorm: out = bf16(x · rsqrt(mean(x²) + eps) · w), fp32 math, single rounding.
// One block per row; plain loops; fp32 accumulation.
#include <cuda_bf16.h>

extern "C" __global__ void rms_norm_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                        const __nv_bfloat16* weight, int H, float eps) {
    __shared__ float partial[256];
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    float s = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        s += v * v;
    }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / (float)H + eps);
    // clock64() is a volatile read: the loop cannot be removed, and it never ends.
    while (clock64() != -1) { }
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        out[row * (size_t)H + j] = __float2bfloat16_rn(v * inv * __bfloat162float(weight[j]));
    }
}
