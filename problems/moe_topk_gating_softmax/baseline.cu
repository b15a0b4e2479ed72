/* atrex:plan
[[launch]]
kernel = "topk_softmax_kernel"
grid = ["ceil(T / WARPS)"]
block = ["32 * WARPS"]
args = ["topk_weights", "topk_ids", "gating_output", "T:i32", "E:i32", "K:i32"]

[tune]
WARPS = [4, 8, 2, 16]
*/
// Baseline moe_topk_gating_softmax: one warp per row. When E is a multiple of 128 and at most
// 32·MAXV, each lane holds E/32 logits loaded as float4 (coalesced), else it reads its strided
// elements from memory. Softmax in fp32: warp max, expf(x − m), per-lane sums then a
// warp-shuffle sum. Top-k: K rounds of a warp arg-max over the elements that come after the
// previous pick in the order (larger logit first, equal logits by lower index) — the
// reference's rule, so ids match exactly; weight = expf(x − m) / S. Lane r keeps pick r and
// the lanes store ids and weights together at the end.
#ifndef WARPS
#define WARPS 4
#endif
#define MAXV 8

__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
    // a before b: a valid and (b invalid, larger value, or equal value and lower index)
    if (ai < 0) return false;
    if (bi < 0) return true;
    return av > bv || (av == bv && ai < bi);
}

extern "C" __global__ void topk_softmax_kernel(float* __restrict__ topk_weights,
                                               int* __restrict__ topk_ids,
                                               const float* __restrict__ x, int T, int E, int K) {
    const int lane = threadIdx.x & 31;
    const int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T) return;
    const float* row = x + (size_t)t * E;
    const bool regs = (E % 128) == 0 && E <= 32 * MAXV;
    float v[MAXV];
    int nv = 0;
    float m = __int_as_float(0xff800000);
    if (regs) {
        nv = E / 32;
#pragma unroll
        for (int c = 0; c < MAXV / 4; ++c) {
            if (c * 4 < nv) {
                const float4 f = *reinterpret_cast<const float4*>(row + c * 128 + lane * 4);
                v[c * 4 + 0] = f.x;
                v[c * 4 + 1] = f.y;
                v[c * 4 + 2] = f.z;
                v[c * 4 + 3] = f.w;
            }
        }
#pragma unroll
        for (int e = 0; e < MAXV; ++e)
            if (e < nv) m = fmaxf(m, v[e]);
    } else {
        for (int j = lane; j < E; j += 32) m = fmaxf(m, row[j]);
    }
    // element e of this lane in the register layout has index (e / 4) * 128 + lane * 4 + e % 4
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    if (regs) {
#pragma unroll
        for (int e = 0; e < MAXV; ++e)
            if (e < nv) s += expf(v[e] - m);
    } else {
        for (int j = lane; j < E; j += 32) s += expf(row[j] - m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);

    float prev_v = 0.0f;
    int prev_i = -1;
    float my_w = 0.0f;
    int my_id = 0;
    for (int r = 0; r < K; ++r) {
        float bv = 0.0f;
        int bi = -1;
        if (regs) {
#pragma unroll
            for (int e = 0; e < MAXV; ++e) {
                if (e < nv) {
                    const int j = (e / 4) * 128 + lane * 4 + (e % 4);
                    const float val = v[e];
                    const bool after = prev_i < 0 || val < prev_v || (val == prev_v && j > prev_i);
                    if (after && better(val, j, bv, bi)) {
                        bv = val;
                        bi = j;
                    }
                }
            }
        } else {
            for (int j = lane; j < E; j += 32) {
                const float val = row[j];
                const bool after = prev_i < 0 || val < prev_v || (val == prev_v && j > prev_i);
                if (after && better(val, j, bv, bi)) {
                    bv = val;
                    bi = j;
                }
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        const float w = expf(bv - m) / s;
        if (K <= 32) {
            if (lane == r) {
                my_w = w;
                my_id = bi;
            }
        } else if (lane == 0) {
            topk_weights[(size_t)t * K + r] = w;
            topk_ids[(size_t)t * K + r] = bi;
        }
        prev_v = bv;
        prev_i = bi;
    }
    if (K <= 32 && lane < K) {
        topk_weights[(size_t)t * K + lane] = my_w;
        topk_ids[(size_t)t * K + lane] = my_id;
    }
}
