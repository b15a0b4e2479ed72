/* atrex:plan
[[launch]]
kernel = "moe_sum_reduce_kernel"
grid = ["ceil(T / TOKENS)", "ceil(H / (8 * BLOCK))"]
block = ["BLOCK"]
args = ["out", "expert_outputs", "T:i32", "K:i32", "H:i32", "routed_scaling_factor:f32"]

[tune]
BLOCK = [256, 128, 64]
TOKENS = [1, 2, 4]
*/
// Baseline moe_sum_reduce: grid (token groups, column groups); each thread owns 8 consecutive
// columns of TOKENS tokens: for every k a 16-byte load of 8 bf16, fp32 sums in k order (the
// reference's order, so bit-identical), multiply by the factor, one bf16 rounding, one 16-byte
// store. Scalar path when H is not a multiple of 8.
#include <cuda_bf16.h>

#ifndef TOKENS
#define TOKENS 1
#endif

extern "C" __global__ void moe_sum_reduce_kernel(__nv_bfloat16* __restrict__ out,
                                                 const __nv_bfloat16* __restrict__ x, int T, int K,
                                                 int H, float factor) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;  // 8-column group
    for (int tt = 0; tt < TOKENS; ++tt) {
        const int t = blockIdx.x * TOKENS + tt;
        if (t >= T) return;
        const __nv_bfloat16* xt = x + (size_t)t * K * H;
        if ((H % 8) == 0) {
            if (c >= H / 8) return;
            float acc[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
            for (int k = 0; k < K; ++k) {
                uint4 p = *reinterpret_cast<const uint4*>(xt + (size_t)k * H + c * 8);
                const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 f = __bfloat1622float2(h2[e]);
                    acc[2 * e] = __fadd_rn(acc[2 * e], f.x);
                    acc[2 * e + 1] = __fadd_rn(acc[2 * e + 1], f.y);
                }
            }
            uint4 r;
            __nv_bfloat162* r2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                r2[e] = __floats2bfloat162_rn(__fmul_rn(factor, acc[2 * e]),
                                              __fmul_rn(factor, acc[2 * e + 1]));
            }
            *reinterpret_cast<uint4*>(out + (size_t)t * H + c * 8) = r;
        } else {
            for (int j = c * 8; j < min(H, c * 8 + 8); ++j) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc = __fadd_rn(acc, __bfloat162float(xt[(size_t)k * H + j]));
                out[(size_t)t * H + j] = __float2bfloat16_rn(__fmul_rn(factor, acc));
            }
        }
    }
}
