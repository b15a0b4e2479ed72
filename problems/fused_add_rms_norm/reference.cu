/* atrex:plan
[[launch]]
kernel = "fused_add_rms_norm_ref"
grid = ["T"]
block = [256]
args = ["out", "residual_out", "x", "residual", "weight", "H:i32", "eps:f32"]
*/
// Reference fused add + RMSNorm: r = bf16(x + residual); out = bf16(float(r) · rsqrt(mean(r²) + eps)
// · w). The norm uses the rounded sum. One block per row, plain loops, fp32 accumulation.
#include <cuda_bf16.h>

extern "C" __global__ void fused_add_rms_norm_ref(__nv_bfloat16* out, __nv_bfloat16* residual_out,
                                                  const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                                  const __nv_bfloat16* weight, int H, float eps) {
    __shared__ float partial[256];
    const size_t base = blockIdx.x * (size_t)H;
    float s = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        __nv_bfloat16 r = __float2bfloat16_rn(__bfloat162float(x[base + j]) + __bfloat162float(residual[base + j]));
        residual_out[base + j] = r;
        float rf = __bfloat162float(r);
        s += rf * rf;
    }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / (float)H + eps);
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float rf = __bfloat162float(residual_out[base + j]);
        out[base + j] = __float2bfloat16_rn(rf * inv * __bfloat162float(weight[j]));
    }
}
