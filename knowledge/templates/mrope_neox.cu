/* atrex:template
id = "tpl-mrope-neox"
title = "Sectioned multimodal NeoX RoPE: one block per token, one thread per (head, frequency)"
operator = "mrope"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["gather-scatter"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: coalesced bf16x2 pair loads; cos/sin rows read once per token from L1"
pitfalls = ["the section of a frequency picks the cos/sin row (t, h or w)", "x1*c - x2*s without FMA contraction for bit parity", "dims beyond the rotary dim are copied unchanged"]
[measured]
s_op = 0.2263
baseline_s_op = 0.4455
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.226 against the baseline's 0.446;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "mrope_neox"
grid = ["T"]
block = ["min(MAXB, 32 * ceil((Hq + Hk) * half / 32))"]
args = ["q_out", "k_out", "q", "k", "cos", "sin", "T:i32", "Hq:i32", "Hk:i32", "D:i32", "half:i32", "mrope_section[0]:i32", "mrope_section[0] + mrope_section[1]:i32"]

[tune]
MAXB = [1024, 512, 256]
*/
// For frequency f of a head: axis = 0 (f < s0), 1 (f < s1) else 2; c, s = cos/sin[axis, t, f];
// out[f] = x1·c − x2·s, out[f + half] = x2·c + x1·s, one bf16 rounding each.
#include <cuda_bf16.h>

__device__ __forceinline__ void rotate(__nv_bfloat16* o, const __nv_bfloat16* x, int f, int half,
                                       float c, float s) {
    const float x1 = __bfloat162float(x[f]);
    const float x2 = __bfloat162float(x[f + half]);
    o[f] = __float2bfloat16_rn(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
    o[f + half] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
}

extern "C" __global__ void mrope_neox(__nv_bfloat16* __restrict__ q_out,
                                      __nv_bfloat16* __restrict__ k_out,
                                      const __nv_bfloat16* __restrict__ q,
                                      const __nv_bfloat16* __restrict__ k,
                                      const float* __restrict__ cos_t,
                                      const float* __restrict__ sin_t, int T, int Hq, int Hk,
                                      int D, int half, int s0, int s1) {
    const long long t = blockIdx.x;
    const int R = 2 * half;
    const int work = (Hq + Hk) * half;
    for (int i = threadIdx.x; i < work; i += blockDim.x) {
        const int h = i / half, f = i - h * half;
        const int axis = f < s0 ? 0 : (f < s1 ? 1 : 2);
        const long long ci = ((long long)axis * T + t) * half + f;
        const float c = __ldg(cos_t + ci), s = __ldg(sin_t + ci);
        if (h < Hq) {
            const long long off = t * (long long)Hq * D + (long long)h * D;
            rotate(q_out + off, q + off, f, half, c, s);
        } else {
            const long long off = t * (long long)Hk * D + (long long)(h - Hq) * D;
            rotate(k_out + off, k + off, f, half, c, s);
        }
    }
    // Dimensions past the rotary part are passed through.
    if (R < D) {
        const int pass = (Hq + Hk) * (D - R);
        for (int i = threadIdx.x; i < pass; i += blockDim.x) {
            const int h = i / (D - R), j = R + i % (D - R);
            if (h < Hq) {
                const long long off = t * (long long)Hq * D + (long long)h * D + j;
                q_out[off] = q[off];
            } else {
                const long long off = t * (long long)Hk * D + (long long)(h - Hq) * D + j;
                k_out[off] = k[off];
            }
        }
    }
}
