/* atrex:template
id = "tpl-l2-norm-warp-per-row"
title = "L2 norm: one warp per row, 16-byte loads, eps inside the rsqrt"
operator = "l2_norm"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["row-reduction"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: close to the bandwidth roofline for H = 2048 rows once enough rows are in flight"
pitfalls = ["T = 1 shapes are launch-bound: nothing but fewer instructions helps", "eps is added to the sum of squares, not to the norm"]
[measured]
s_op = 0.5374
baseline_s_op = 0.6453
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.537 against the baseline's 0.645;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "l2_norm_warp_row"
grid = ["ceil(T / ROWS)"]
block = ["32 * ROWS"]
args = ["out", "x", "T:i32", "H:i32", "eps:f32"]

[tune]
ROWS = [4, 8, 2, 16]
*/
// out = bf16(x · rsqrt(Σ x² + eps)) per row; the second pass re-reads the row from L1/L2.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void l2_norm_warp_row(__nv_bfloat16* __restrict__ out,
                                            const __nv_bfloat16* __restrict__ x, int T, int H,
                                            float eps) {
    const int lane = threadIdx.x & 31;
    const size_t row = (size_t)blockIdx.x * ROWS + (threadIdx.x >> 5);
    if (row >= (size_t)T) return;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    float s = 0.0f;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        for (int v = lane; v < nv; v += 32) {
            uint4 p = __ldg(xv + v);
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
        const float inv = rsqrtf(warp_sum(s) + eps);
        uint4* ov = reinterpret_cast<uint4*>(orow);
        for (int v = lane; v < nv; v += 32) {
            uint4 p = __ldg(xv + v), r;
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
            __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                o[k] = __floats2bfloat162_rn(f.x * inv, f.y * inv);
            }
            ov[v] = r;
        }
    } else {
        for (int j = lane; j < H; j += 32) {
            float v = __bfloat162float(xr[j]);
            s += v * v;
        }
        const float inv = rsqrtf(warp_sum(s) + eps);
        for (int j = lane; j < H; j += 32) orow[j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv);
    }
}
