/* atrex:template
id = "tpl-rms-norm-warp-per-row"
title = "RMSNorm: one warp per row, several rows per block (small hidden sizes)"
operator = "rms_norm"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["row-reduction"]
bottlenecks = ["memory"]
category = "parallelism"
expected_gain = "1.2-2x for H <= 2048 where a block per row leaves most threads idle"
pitfalls = ["no __syncthreads: rows are independent per warp", "large H makes each warp loop long: prefer a block per row above ~4096"]
[measured]
s_op = 0.2723
baseline_s_op = 0.2363
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.272, every shape passing at the strict level (docs/measurements/bench-best-rms_norm.json).
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 56/56 shapes pass strict on 5 seeds): S_op 0.246 against the baseline's 0.236; 1.04x the baseline (docs/measurements/bench-best-rms_norm.json).
/* atrex:plan
[[launch]]
kernel = "rms_norm_warp_row"
grid = ["ceil(T / ROWS)"]
block = ["32 * ROWS"]
args = ["out", "x", "weight", "T:i32", "H:i32", "eps:f32"]

[tune]
ROWS = [4, 8, 2, 16]
UNROLL = [2, 1, 4]
*/
// A warp reduces its row with shuffles only; the second pass re-reads the row (an L1/L2 hit for
// rows of a few KiB). 16-byte vectors when H % 8 == 0.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void rms_norm_warp_row(__nv_bfloat16* __restrict__ out,
                                             const __nv_bfloat16* __restrict__ x,
                                             const __nv_bfloat16* __restrict__ weight, int T,
                                             int H, float eps) {
    const int lane = threadIdx.x & 31;
    const size_t row = (size_t)blockIdx.x * ROWS + (threadIdx.x >> 5);
    if (row >= (size_t)T) return;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    float s = 0.0f;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
#pragma unroll UNROLL
        for (int v = lane; v < nv; v += 32) {
            uint4 p = __ldg(xv + v);
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
        const float inv = rsqrtf(warp_sum(s) / (float)H + eps);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(orow);
#pragma unroll UNROLL
        for (int v = lane; v < nv; v += 32) {
            uint4 p = __ldg(xv + v), q = __ldg(wv + v), r;
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
            const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&q);
            __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                float2 g = __bfloat1622float2(w[k]);
                o[k] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
            }
            ov[v] = r;
        }
    } else {
        for (int j = lane; j < H; j += 32) {
            float v = __bfloat162float(xr[j]);
            s += v * v;
        }
        const float inv = rsqrtf(warp_sum(s) / (float)H + eps);
        for (int j = lane; j < H; j += 32)
            orow[j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv * __bfloat162float(weight[j]));
    }
}
