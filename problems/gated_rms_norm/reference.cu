/* atrex:plan
[[launch]]
kernel = "gated_rms_norm_ref"
grid = ["R"]
block = [128]
args = ["out", "x", "weight", "z", "H:i32", "eps:f32"]
*/
// Reference gated RMSNorm (norm before gate, SiLU): rstd = rsqrt(mean(x²) + eps);
// out = bf16(((x · rstd) · w) · silu(z)), fp32, single rounding. One block per row,
// shared-memory tree sum.
#include <cuda_bf16.h>

extern "C" __global__ void gated_rms_norm_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                              const __nv_bfloat16* weight,
                                              const __nv_bfloat16* z, int H, float eps) {
    __shared__ float buf[128];
    const size_t base = blockIdx.x * (size_t)H;
    float s = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float v = __bfloat162float(x[base + j]);
        s += v * v;
    }
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float rstd = rsqrtf(buf[0] / (float)H + eps);
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float zf = __bfloat162float(z[base + j]);
        const float gate = zf / (1.0f + expf(-zf));
        const float y = ((__bfloat162float(x[base + j]) * rstd) * __bfloat162float(weight[j])) * gate;
        out[base + j] = __float2bfloat16_rn(y);
    }
}
