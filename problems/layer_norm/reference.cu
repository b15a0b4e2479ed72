/* atrex:plan
[[launch]]
kernel = "layer_norm_ref"
grid = ["rows"]
block = [256]
args = ["out", "x", "weight", "bias", "C:i32", "eps:f32"]
*/
// Reference LayerNorm: out = bf16((x − μ) / sqrt(var + eps) · w + b), biased variance, fp32.
// One block per row; two passes over the row (mean, then Σ(x − μ)²); shared-memory tree sums.
#include <cuda_bf16.h>

__device__ float block_sum(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float total = buf[0];
    __syncthreads();
    return total;
}

extern "C" __global__ void layer_norm_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                          const __nv_bfloat16* weight, const __nv_bfloat16* bias,
                                          int C, float eps) {
    __shared__ float buf[256];
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)C;
    float s = 0.0f;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += __bfloat162float(xr[j]);
    const float mean = block_sum(s, buf) / (float)C;
    float q = 0.0f;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float d = __bfloat162float(xr[j]) - mean;
        q += d * d;
    }
    const float var = block_sum(q, buf) / (float)C;
    const float sd = sqrtf(var + eps);
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float n = (__bfloat162float(xr[j]) - mean) / sd;
        out[row * (size_t)C + j] =
            __float2bfloat16_rn(n * __bfloat162float(weight[j]) + __bfloat162float(bias[j]));
    }
}
