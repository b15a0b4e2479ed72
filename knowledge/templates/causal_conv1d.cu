/* atrex:template
id = "tpl-causal-conv1d"
title = "Depthwise causal conv1d + SiLU: a block per (channel, token tile), taps in registers"
operator = "causal_conv1d"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["scan-conv"]
bottlenecks = ["memory"]
category = "memory-coalescing"
expected_gain = "reads each input once (neighbours come from L1); coalesced along the token axis"
pitfalls = ["tokens before 0 come from initial_state (oldest first)", "fp32 accumulation starts from the bias; bf16 rounding before and after SiLU", "T = 1 decode shapes: one token per channel, use many channels per block"]
[measured]
s_op = 0.0936
baseline_s_op = 0.0919
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 9/9 shapes pass strict on 5 seeds): S_op 0.094 against the baseline's 0.092; 1.02x the baseline (docs/measurements/bench-best-causal_conv1d.json).
/* atrex:plan
[[launch]]
kernel = "causal_conv1d_silu"
grid = ["ceil(T / TT)", "ceil(C / CPB)"]
block = ["TT", "CPB"]
args = ["out", "x", "weight", "bias", "initial_state", "C:i32", "T:i32", "W:i32"]

[tune]
TT = [128, 64, 32, 256]
CPB = [1, 2, 4]
*/
// out[c, t] = bf16(silu(bf16(bias[c] + Σ_w weight[c, w] · x[c, t − (W−1) + w]))), where
// x[c, τ < 0] = initial_state[0, c, τ + W − 1].
#include <cuda_bf16.h>

#define MAXW 8

extern "C" __global__ void causal_conv1d_silu(__nv_bfloat16* __restrict__ out,
                                              const __nv_bfloat16* __restrict__ x,
                                              const __nv_bfloat16* __restrict__ weight,
                                              const __nv_bfloat16* __restrict__ bias,
                                              const __nv_bfloat16* __restrict__ initial_state,
                                              int C, int T, int W) {
    const int c = blockIdx.y * blockDim.y + threadIdx.y;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C || t >= T) return;
    const __nv_bfloat16* xc = x + (long long)c * T;
    float w[MAXW];
#pragma unroll
    for (int j = 0; j < MAXW; ++j) w[j] = j < W ? __bfloat162float(weight[c * W + j]) : 0.0f;
    float acc = __bfloat162float(bias[c]);
#pragma unroll
    for (int j = 0; j < MAXW; ++j) {
        if (j >= W) break;
        const int tau = t - (W - 1) + j;
        const float v = tau >= 0 ? __bfloat162float(xc[tau])
                                 : __bfloat162float(initial_state[c * (W - 1) + tau + W - 1]);
        acc += w[j] * v;
    }
    const float y = __bfloat162float(__float2bfloat16_rn(acc));
    out[(long long)c * T + t] = __float2bfloat16_rn(y / (1.0f + expf(-y)));
}
