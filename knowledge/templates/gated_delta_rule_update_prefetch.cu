/* atrex:template
id = "tpl-gated-delta-rule-update-prefetch"
title = "Gated delta rule, token-recurrent: state in registers, the next chunk's inputs loaded during this chunk's recurrence, output from the state before the update"
operator = "gated_delta_rule_update"
architectures = ["hopper", "ampere", "ada", "blackwell"]
families = ["scan-conv"]
bottlenecks = ["balanced"]
category = "pipelining"
expected_gain = "1.3x over the plain recurrence: no load latency between chunks, and o = d·(H·q̂σ) + δ·(k̂·q̂σ) lets both dot products of a token run together from the state before its update"
pitfalls = ["the token loop is sequential: the limit is shared-memory traffic (every thread reads its rows of k̂ and q̂ per token: about 1 KB per state column per token, 31 KB per SM) and the per-token dependency chain, not DRAM", "blocking TB tokens per state pass (the dots of all TB tokens from the state before the group, then one update h = s·h + Σ c_j k̂_j) reads more shared memory per token and measured 1.5x slower at TB = 4", "the decay is applied before the delta: p = d·(H·k̂), not H·k̂"]
[measured]
s_op = 0.0209
baseline_s_op = 0.0154
gpu = "NVIDIA H200"
date = "2026-12-01"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 17/17 shapes pass strict on 5 seeds): S_op 0.021 (0.0209) against the baseline's 0.0154; 1.35x the baseline (docs/measurements/bench-best-gated_delta_rule_update.json): 8192 tokens 4.23 → 3.11 ms (0.38 µs per token), with KS = 8 lanes per column (KS = 4: 0.0202, 3.22 ms). Profile (shape 7, `profile --source`): 128 blocks of 4 warps (one warp per SM sub-partition), IPC 0.3 per sub-partition; stalls short_scoreboard 36 % (shared-memory loads of k̂ and q̂), selected 30 %, wait 25 %; FFMA 48 % and FMUL 16 % of the instructions. Also measured (quick, six shapes): BV 16 / KS 8 (two warps per sub-partition) equal, BV 32 / KS 8 +4 % (kept); TC 16 −2 %; TB = 2 / 4 / 8 tokens per state pass 0.017 / 0.014 / 0.009 against 0.020. The way past this: the chunked (WY) form, whose state passes are matrix products.
/* atrex:plan
[[launch]]
kernel = "gdr_pool_copy"
grid = ["min(4 * 132 * 8, ceil(S * Hv * K * V / (4 * 256)))"]
block = [256]
args = ["final_state", "initial_state", "initial_state_indices", "B:i32",
        "S:i64", "Hv * K * V:i64"]

[[launch]]
kernel = "gdr_update"
grid = ["B * Hv", "V // BV"]
block = ["BV * KS"]
smem = "(2 * TC * (2 * 128 + BV + 3) + TC * BV) * 4"
args = ["out", "final_state", "A_log", "a", "dt_bias", "q", "k", "v", "b", "initial_state",
        "initial_state_indices", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "scale:f32", "softplus_beta:f32", "softplus_threshold:f32", "use_qk_l2norm:i32"]

[tune]
BV = [32, 16]       # value columns per block
KS = [8, 4]         # threads sharing one state column (each holds 128 / KS rows)
TC = [32, 16]       # tokens staged in shared memory per step
*/
// Gated delta rule, token-recurrent (decode and short prefill).
// Launch 1: float4 grid-stride copy of the state pool into final_state, skipping the rows that
// launch 2 overwrites. Launch 2: one block per (batch, value head, BV value columns); each state
// column is split over KS adjacent lanes (rows interleaved in float4 groups, conflict-free
// shared-memory reads), so the state tile K×BV stays in registers for the whole sequence.
// Tokens go in chunks of TC, staged in shared memory (two buffers): L2-normalized q̂·σ and k̂
// (fp32), their dot product k̂·q̂σ, v and the gates (exp(γ), sigmoid(b)). The next chunk's raw
// bf16 inputs are loaded into registers before this chunk's recurrence and normalized into the
// other buffer after it, so no chunk waits on memory. Per token, both dot products come from
// the state before the update (p = d·(H·k̂), o = d·(H·q̂σ) + δ·(k̂·q̂σ), δ = (v − p)·wβ), with
// one shuffle reduction over the KS lanes for the pair, then H ← d·H + k̂ ⊗ δ. Outputs are
// buffered in shared memory and stored as 16-byte bf16 vectors.
#include <cuda_bf16.h>

#ifndef BV
#define BV 32
#endif
#ifndef KS
#define KS 8
#endif
#ifndef TC
#define TC 32
#endif
#define KD 128                 // key width this kernel is written for (checked at run time)
#define NT (BV * KS)           // threads per block
#define G4 (KD / (4 * KS))     // float4 row groups per thread

static_assert(32 % KS == 0, "KS must divide the warp");
static_assert(NT % 32 == 0 && NT <= 1024, "block must be whole warps");
static_assert(BV % 8 == 0, "BV must be a multiple of 8");

extern "C" __global__ void gdr_pool_copy(float* __restrict__ dst, const float* __restrict__ src,
                                         const int* __restrict__ idx, int B, long long S,
                                         long long row_elems) {
    const long long n4 = S * row_elems / 4;
    const long long row4 = row_elems / 4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
         i += (long long)gridDim.x * blockDim.x) {
        const long long s = i / row4;
        bool touched = false;
        for (int bb = 0; bb < B; ++bb) touched |= (idx[bb] == s);
        if (!touched) reinterpret_cast<float4*>(dst)[i] = __ldg(reinterpret_cast<const float4*>(src) + i);
    }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

#define NW (NT / 32)
#define TU ((TC + NW - 1) / NW)                 // tokens per warp in the staging
#define VU ((TC * (BV / 8) + NT - 1) / NT)      // v vectors per thread in the staging
static_assert(TC <= NT, "gates: one thread per token");

// A chunk's raw inputs, loaded into registers while the previous chunk's recurrence runs.
struct Raw {
    uint2 q[TU], k[TU];
    uint4 v[VU];
    __nv_bfloat16 a, b;
};

__device__ __forceinline__ void load_raw(Raw& r, const __nv_bfloat16* __restrict__ q,
                                         const __nv_bfloat16* __restrict__ k,
                                         const __nv_bfloat16* __restrict__ v,
                                         const __nv_bfloat16* __restrict__ a,
                                         const __nv_bfloat16* __restrict__ b, long long tok0, int n,
                                         int Hq, int Hv, int j, int m, int V, int v0) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
    for (int u = 0; u < TU; ++u) {
        const int tt = warp + NW * u;
        r.q[u] = r.k[u] = make_uint2(0, 0);
        if (tt < n) {
            const long long base = ((tok0 + tt) * Hq + j) * KD + lane * 4;
            r.q[u] = __ldg(reinterpret_cast<const uint2*>(q + base));
            r.k[u] = __ldg(reinterpret_cast<const uint2*>(k + base));
        }
    }
#pragma unroll
    for (int u = 0; u < VU; ++u) {
        const int i = tid + NT * u;
        r.v[u] = make_uint4(0, 0, 0, 0);
        if (i < n * (BV / 8)) {
            const int tt = i / (BV / 8), c8 = i % (BV / 8);
            r.v[u] = __ldg(reinterpret_cast<const uint4*>(v + ((tok0 + tt) * Hv + m) * V + v0 + c8 * 8));
        }
    }
    if (tid < n) {
        const long long g = (tok0 + tid) * Hv + m;
        r.a = a[g];
        r.b = b[g];
    }
}

// Normalized q̂·σ, k̂, their dot product, v and the gates of a chunk into a staging buffer.
__device__ __forceinline__ void store_raw(const Raw& r, float* qs, float* kss, float* vs, float* dec,
                                          float* wbs, float* kqs, int n, float A, float dtb, float scale,
                                          float beta, float threshold, int use_l2) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
    for (int u = 0; u < TU; ++u) {
        const int tt = warp + NW * u;
        if (tt < n) {
            const __nv_bfloat162* q2 = reinterpret_cast<const __nv_bfloat162*>(&r.q[u]);
            const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&r.k[u]);
            const float2 qa = __bfloat1622float2(q2[0]), qb = __bfloat1622float2(q2[1]);
            const float2 ka = __bfloat1622float2(k2[0]), kb = __bfloat1622float2(k2[1]);
            float qn = 1.0f, kn = 1.0f;
            if (use_l2) {
                qn = fmaxf(sqrtf(warp_sum(qa.x * qa.x + qa.y * qa.y + qb.x * qb.x + qb.y * qb.y)), 1e-6f);
                kn = fmaxf(sqrtf(warp_sum(ka.x * ka.x + ka.y * ka.y + kb.x * kb.x + kb.y * kb.y)), 1e-6f);
            }
            const float4 qq = make_float4(qa.x / qn * scale, qa.y / qn * scale, qb.x / qn * scale, qb.y / qn * scale);
            const float4 kk = make_float4(ka.x / kn, ka.y / kn, kb.x / kn, kb.y / kn);
            reinterpret_cast<float4*>(qs + tt * KD)[lane] = qq;
            reinterpret_cast<float4*>(kss + tt * KD)[lane] = kk;
            const float kq = warp_sum(kk.x * qq.x + kk.y * qq.y + kk.z * qq.z + kk.w * qq.w);
            if (lane == 0) kqs[tt] = kq;
        }
    }
#pragma unroll
    for (int u = 0; u < VU; ++u) {
        const int i = tid + NT * u;
        if (i < n * (BV / 8)) {
            const int tt = i / (BV / 8), c8 = i % (BV / 8);
            const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(&r.v[u]);
            float4 lo, hi;
            float2 f0 = __bfloat1622float2(p2[0]), f1 = __bfloat1622float2(p2[1]);
            float2 f2 = __bfloat1622float2(p2[2]), f3 = __bfloat1622float2(p2[3]);
            lo = make_float4(f0.x, f0.y, f1.x, f1.y);
            hi = make_float4(f2.x, f2.y, f3.x, f3.y);
            reinterpret_cast<float4*>(vs + tt * BV + c8 * 8)[0] = lo;
            reinterpret_cast<float4*>(vs + tt * BV + c8 * 8)[1] = hi;
        }
    }
    if (tid < n) {
        const float z = __bfloat162float(r.a) + dtb;
        const float sp = (beta * z > threshold) ? z : log1pf(expf(beta * z)) / beta;
        dec[tid] = expf(-A * sp);
        wbs[tid] = 1.0f / (1.0f + expf(-__bfloat162float(r.b)));
    }
}

extern "C" __global__ void __launch_bounds__(NT) gdr_update(
    __nv_bfloat16* __restrict__ out, float* __restrict__ final_state,
    const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
    const __nv_bfloat16* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ b, const float* __restrict__ initial_state,
    const int* __restrict__ initial_state_indices, int T, int Hv, int Hq, int K, int V,
    float scale, float beta, float threshold, int use_l2) {
    if (K != KD || (V % BV) != 0) __trap();
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    constexpr int BUF = TC * (2 * KD + BV + 3);
    float* os = smem + 2 * BUF;  // [TC][BV]

    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv;
    const int v0 = blockIdx.y * BV;
    const int tid = threadIdx.x;
    const int c = tid / KS, kq = tid % KS;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const long long row = initial_state_indices[bi];
    const float A = expf(A_log[m]);
    const float dtb = __bfloat162float(dt_bias[m]);

    Raw raw;
    load_raw(raw, q, k, v, a, b, (long long)bi * T, min(TC, T), Hq, Hv, j, m, V, v0);

    // State tile: rows 4·(kq + KS·i) + e of column v0 + c.
    float h[G4][4];
    const float* h0 = initial_state + ((row * Hv + m) * KD) * (long long)V + v0 + c;
#pragma unroll
    for (int i = 0; i < G4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) h[i][e] = h0[(long long)(4 * (kq + KS * i) + e) * V];

    {
        float* bq = smem;
        store_raw(raw, bq, bq + TC * KD, bq + 2 * TC * KD, bq + 2 * TC * KD + TC * BV,
                  bq + 2 * TC * KD + TC * BV + TC, bq + 2 * TC * KD + TC * BV + 2 * TC, min(TC, T), A, dtb,
                  scale, beta, threshold, use_l2);
    }
    __syncthreads();

    int cur = 0;
    for (int t0 = 0; t0 < T; t0 += TC) {
        const int n = min(TC, T - t0);
        const long long tok0 = (long long)bi * T + t0;
        const int nn = min(TC, T - t0 - TC);  // the next chunk's tokens (≤ 0: none)
        if (nn > 0) load_raw(raw, q, k, v, a, b, tok0 + TC, nn, Hq, Hv, j, m, V, v0);
        const float* bq = smem + cur * BUF;
        const float* kss = bq + TC * KD;
        const float* vs = bq + 2 * TC * KD;
        const float* dec = vs + TC * BV;
        const float* wbs = dec + TC;
        const float* kqs = wbs + TC;

        for (int tt = 0; tt < n; ++tt) {
            const float d = dec[tt];
            const float4* k4 = reinterpret_cast<const float4*>(kss + tt * KD);
            const float4* q4 = reinterpret_cast<const float4*>(bq + tt * KD);
            // p and o from the state before this token: p = d·(H·k̂), o = d·(H·q̂σ) + δ·(k̂·q̂σ).
            float p0 = 0.0f, p1 = 0.0f, o0 = 0.0f, o1 = 0.0f;
            float4 kk[G4];
#pragma unroll
            for (int i = 0; i < G4; ++i) {
                kk[i] = k4[kq + KS * i];
                const float4 qq = q4[kq + KS * i];
                p0 = fmaf(h[i][0], kk[i].x, p0); p1 = fmaf(h[i][1], kk[i].y, p1);
                p0 = fmaf(h[i][2], kk[i].z, p0); p1 = fmaf(h[i][3], kk[i].w, p1);
                o0 = fmaf(h[i][0], qq.x, o0); o1 = fmaf(h[i][1], qq.y, o1);
                o0 = fmaf(h[i][2], qq.z, o0); o1 = fmaf(h[i][3], qq.w, o1);
            }
            float p = p0 + p1, o = o0 + o1;
#pragma unroll
            for (int s = KS / 2; s > 0; s >>= 1) {
                p += __shfl_xor_sync(0xffffffffu, p, s);
                o += __shfl_xor_sync(0xffffffffu, o, s);
            }
            const float delta = (vs[tt * BV + c] - d * p) * wbs[tt];
            o = fmaf(delta, kqs[tt], d * o);
#pragma unroll
            for (int i = 0; i < G4; ++i) {
                h[i][0] = fmaf(h[i][0], d, kk[i].x * delta);
                h[i][1] = fmaf(h[i][1], d, kk[i].y * delta);
                h[i][2] = fmaf(h[i][2], d, kk[i].z * delta);
                h[i][3] = fmaf(h[i][3], d, kk[i].w * delta);
            }
            if (kq == 0) os[tt * BV + c] = o;
        }
        if (nn > 0) {
            float* nb = smem + (cur ^ 1) * BUF;
            store_raw(raw, nb, nb + TC * KD, nb + 2 * TC * KD, nb + 2 * TC * KD + TC * BV,
                      nb + 2 * TC * KD + TC * BV + TC, nb + 2 * TC * KD + TC * BV + 2 * TC, nn, A, dtb, scale,
                      beta, threshold, use_l2);
        }
        __syncthreads();
        // Store the buffered outputs, 8 bf16 per thread and step.
        for (int i = tid; i < n * (BV / 8); i += NT) {
            const int tt = i / (BV / 8), c8 = i % (BV / 8);
            uint4 pk;
            __nv_bfloat162* p2 = reinterpret_cast<__nv_bfloat162*>(&pk);
#pragma unroll
            for (int e = 0; e < 4; ++e)
                p2[e] = __floats2bfloat162_rn(os[tt * BV + c8 * 8 + 2 * e], os[tt * BV + c8 * 8 + 2 * e + 1]);
            *reinterpret_cast<uint4*>(out + ((tok0 + tt) * Hv + m) * V + v0 + c8 * 8) = pk;
        }
        __syncthreads();  // os is rewritten by the next chunk
        cur ^= 1;
    }

    float* hf = final_state + ((row * Hv + m) * KD) * (long long)V + v0 + c;
#pragma unroll
    for (int i = 0; i < G4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) hf[(long long)(4 * (kq + KS * i) + e) * V] = h[i][e];
}
