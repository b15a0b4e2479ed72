/* atrex:template
id = "tpl-silu-and-mul-flat"
title = "SwiGLU: flattened grid over 16-byte vectors of all rows, several vectors per thread"
operator = "silu_and_mul"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["elementwise"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: 1.1-3x on shapes with few rows (T = 1 decode) where a row-per-block grid starves the GPU"
pitfalls = ["bf16(silu(g)) is rounded before the multiply", "d % 8 != 0 takes the scalar path"]
[measured]
s_op = 0.5337
baseline_s_op = 0.5536
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.534 against the baseline's 0.554;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "silu_and_mul_flat"
grid = ["max(1, ceil(T * ceil(d / 8) / (BLOCK * VPT)))"]
block = ["BLOCK"]
args = ["out", "x", "T:i32", "d:i32"]

[tune]
BLOCK = [256, 128, 512]
VPT = [2, 1, 4]
*/
// Vector v of the flattened [T, d/8] output: row v / (d/8), column v % (d/8). Each thread
// handles VPT vectors spaced a block apart, so that loads of one warp stay contiguous.
#include <cuda_bf16.h>

__device__ __forceinline__ float silu_rounded(float g) {
    return __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g))));
}

extern "C" __global__ void silu_and_mul_flat(__nv_bfloat16* __restrict__ out,
                                             const __nv_bfloat16* __restrict__ x, int T, int d) {
    if ((d & 7) == 0) {
        const long long per_row = d >> 3;
        const long long total = (long long)T * per_row;
        const long long first = (long long)blockIdx.x * BLOCK * VPT + threadIdx.x;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
            const long long v = first + (long long)i * BLOCK;
            if (v >= total) break;
            const long long t = v / per_row, c = v - t * per_row;
            const uint4* g4 = reinterpret_cast<const uint4*>(x + t * 2 * (long long)d);
            const uint4* u4 = reinterpret_cast<const uint4*>(x + t * 2 * (long long)d + d);
            uint4 gp = __ldg(g4 + c), up = __ldg(u4 + c), r;
            const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gp);
            const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&up);
            __nv_bfloat162* r2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 g = __bfloat1622float2(g2[k]);
                float2 u = __bfloat1622float2(u2[k]);
                r2[k] = __floats2bfloat162_rn(silu_rounded(g.x) * u.x, silu_rounded(g.y) * u.y);
            }
            reinterpret_cast<uint4*>(out + t * (long long)d)[c] = r;
        }
    } else {
        const long long total = (long long)T * d;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
             e += (long long)gridDim.x * blockDim.x) {
            const long long t = e / d, c = e - t * d;
            const float g = __bfloat162float(x[t * 2 * (long long)d + c]);
            const float u = __bfloat162float(x[t * 2 * (long long)d + d + c]);
            out[e] = __float2bfloat16_rn(silu_rounded(g) * u);
        }
    }
}
