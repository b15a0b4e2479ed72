/* atrex:template
id = "tpl-moe-sum-reduce"
title = "MoE top-k sum: 16-byte loads of the K expert rows, fp32 sum, scale, one store"
operator = "moe_sum_reduce"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["moe"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: bandwidth-bound at K x H reads per token; flattened grid keeps small T busy"
pitfalls = ["sum in fp32 in expert order, then multiply by the scaling factor, one rounding", "H % 8 != 0 takes the scalar path"]
[measured]
s_op = 0.7302
baseline_s_op = 0.7363
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.730 against the baseline's 0.736;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "moe_sum_reduce"
grid = ["max(1, ceil(T * ceil(H / 8) / BLOCK))"]
block = ["BLOCK"]
args = ["out", "expert_outputs", "T:i32", "K:i32", "H:i32", "routed_scaling_factor:f32"]

[tune]
BLOCK = [256, 128, 512]
*/
#include <cuda_bf16.h>

extern "C" __global__ void moe_sum_reduce(__nv_bfloat16* __restrict__ out,
                                          const __nv_bfloat16* __restrict__ expert_outputs,
                                          int T, int K, int H, float scaling) {
    if ((H & 7) == 0) {
        const long long per_row = H >> 3;
        const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
        if (v >= (long long)T * per_row) return;
        const long long t = v / per_row, c = v - t * per_row;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int k = 0; k < K; ++k) {
            const uint4* src = reinterpret_cast<const uint4*>(expert_outputs + (t * K + k) * (long long)H);
            uint4 p = __ldg(src + c);
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f = __bfloat1622float2(h[j]);
                acc[2 * j] += f.x;
                acc[2 * j + 1] += f.y;
            }
        }
        uint4 r;
        __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
        for (int j = 0; j < 4; ++j) o[j] = __floats2bfloat162_rn(acc[2 * j] * scaling, acc[2 * j + 1] * scaling);
        reinterpret_cast<uint4*>(out + t * (long long)H)[c] = r;
    } else {
        const long long total = (long long)T * H;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
             e += (long long)gridDim.x * blockDim.x) {
            const long long t = e / H, c = e - t * H;
            float a = 0.0f;
            for (int k = 0; k < K; ++k) a += __bfloat162float(expert_outputs[(t * K + k) * (long long)H + c]);
            out[e] = __float2bfloat16_rn(a * scaling);
        }
    }
}
