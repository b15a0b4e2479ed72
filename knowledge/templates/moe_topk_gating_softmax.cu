/* atrex:template
id = "tpl-moe-topk-gating-softmax"
title = "Router softmax + top-k: one warp per token, logits in registers, K rounds of warp argmax"
operator = "moe_topk_gating_softmax"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["topk", "moe"]
bottlenecks = ["memory"]
category = "reduction"
expected_gain = "one pass over the logits; no shared memory or block barriers"
pitfalls = ["ids in descending probability; ties to the lower index", "weights are not renormalized", "E up to 32 * MAXPL"]
[measured]
s_op = 0.0231
baseline_s_op = 0.0152
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.023, every shape passing at the strict level (docs/measurements/bench-best-moe_topk_gating_softmax.json).
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 10/10 shapes pass strict on 5 seeds): S_op 0.021 against the baseline's 0.015; 1.36x the baseline (docs/measurements/bench-best-moe_topk_gating_softmax.json).
/* atrex:plan
[[launch]]
kernel = "topk_gating_softmax"
grid = ["ceil(T / WARPS)"]
block = ["32 * WARPS"]
args = ["topk_weights", "topk_ids", "gating_output", "T:i32", "E:i32", "K:i32"]

[tune]
WARPS = [4, 8, 2]
MAXPL = [8, 16]
*/
// Lane l holds logits l, l + 32, … (up to MAXPL per lane). Softmax in fp32 with expf and one
// division per value, then K rounds: warp argmax (value, then lower index), the winner's slot
// is cleared.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void topk_gating_softmax(float* __restrict__ topk_weights,
                                               int* __restrict__ topk_ids,
                                               const float* __restrict__ gating_output, int T,
                                               int E, int K) {
    const int lane = threadIdx.x & 31;
    const long long t = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T) return;
    const float* row = gating_output + t * E;
    float p[MAXPL];
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < MAXPL; ++i) {
        const int e = lane + 32 * i;
        p[i] = e < E ? __ldg(row + e) : NEG_INF;
        m = fmaxf(m, p[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < MAXPL; ++i) {
        const int e = lane + 32 * i;
        p[i] = e < E ? expf(p[i] - m) : 0.0f;
        s += p[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
#pragma unroll
    for (int i = 0; i < MAXPL; ++i) p[i] = (lane + 32 * i < E) ? p[i] / s : -1.0f;
    for (int k = 0; k < K; ++k) {
        float bv = -1.0f;
        int bi = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < MAXPL; ++i) {
            const int e = lane + 32 * i;
            if (p[i] > bv) {
                bv = p[i];
                bi = e;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            topk_weights[t * K + k] = bv;
            topk_ids[t * K + k] = bi;
        }
        if ((bi & 31) == lane) {
#pragma unroll
            for (int i = 0; i < MAXPL; ++i)
                if (lane + 32 * i == bi) p[i] = -1.0f;
        }
    }
}
