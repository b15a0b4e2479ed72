/* atrex:template
id = "tpl-gated-delta-rule-update-chunked"
title = "Gated delta rule in the chunked (WY) form on tensor cores: every chunk's W, U and Aqk at once, then the chunks in order as three TF32 matrix products per chunk with the state exact in fp32 accumulators"
operator = "gated_delta_rule_update"
architectures = ["hopper", "ampere", "ada", "blackwell"]
families = ["scan-conv"]
bottlenecks = ["memory", "balanced"]
category = "algorithm"
expected_gain = "3.1x over the token recurrence on sequences of 128 tokens and more: 64-token chunks whose state passes are matrix products (Δ = U − W·S, O = Qg·S + Aqk·Δ, S ← e^G·S + K̃ᵀ·Δ on mma.sync TF32), after a launch that prepares every chunk in parallel"
pitfalls = ["exp(G_i − G_j) only where i ≥ j: above the diagonal the difference is positive and can overflow, and inf · 0 is NaN", "padding tokens of the last chunk need β = 0, γ = 0 and zero-filled q, k and v (cp.async with source size 0), or a stale NaN reaches the state", "the state must stay fp32 across chunks: keep it in the accumulators of the update product and give the other products a TF32-rounded copy in shared memory", "the final state's error is the update product's rounding: K̃ = kfac·k rounded to TF32 times Δ rounded to TF32 put elements at 1.4e-5 against atol 1e-5 (they passed on rtol); raw bf16 k is exact in TF32, so kfac goes on Δ and only Δ is rounded (max 6.2e-6)", "the pool copy belongs where its latency hides: first in the prep it stalled every prep block (28 vs 37 µs on 512 tokens without it); in the scan, eight loads per thread before the stores, while chunk 0 arrives"]
[measured]
s_op = 0.0653
baseline_s_op = 0.0154
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-12-02, `bench --full`, 17/17 shapes pass strict on 5 seeds, final_state max |err| 6.2e-6, out within one bf16 rounding): S_op 0.065 (0.0647) against the baseline's 0.0154 and the token recurrence's 0.0209 (tpl-gated-delta-rule-update-prefetch, which this template replaces and keeps as its path for T ≤ CMIN); 4.2x the baseline (docs/measurements/bench-best-gated_delta_rule_update.json). Per shape: 128 tokens 60.6 → 29.4 µs, 512 tokens 206 → 58 µs, 1033 tokens 404 → 111 µs, 8192 tokens 3.11 → 0.65 ms; T = 1 unchanged (the recurrence). Profile (shape 7, 8192 tokens, 32 heads): prep 269 µs (4096 blocks, SM 43 %, DRAM 30 %: 246 MB of W, U and Aqk written, tensor pipe 15 %; top stall mio_throttle), scan 389 µs = 3.0 µs per chunk (128 blocks of 8 warps, tensor pipe 26 %, stalls wait / long_scoreboard: each chunk's products wait on the previous chunk's state). On 512 tokens the prep takes 24 µs and the scan 32 µs. Steps (8192 tokens, prep + scan under the profiler): the first version 528 + 585 µs; fragment-order W and Aqk with 8-byte fragment loads and the factors of q and k off the operands, 444 + 479; both products that read S in one phase, two barriers a chunk; v by cp.async and the pool copy moved to the scan, 355 + 437 (0.0563 in full); the substitution in 16-row blocks, the off-diagonal part on the tensor cores (2016 → 480 FMA per column), and W in bf16 (88 → 72 KB per chunk and block), 269 + 389 (0.0647). Skipping 32 of the 88 KB a chunk loads took 14 % off the scan: the loads are not its limit. Also measured (quick): SK 2 (two accumulator chains per product) +1 %; two columns of [W | U] per thread in the plain substitution, one read of A for both, 0.048 against 0.062 (254 registers, and NVRTC took 9.9 s); CMIN 0 (T = 1 through the chunks) 0.0396 / 0.0100 / 0.0204 against the recurrence's 0.137 / 0.039 / 0.076 on shapes 0, 8, 9. What is left: more independent warps per SM in the scan (a chunk is 3.0 µs against about 0.8 µs of tensor work), or the prep fused into it by warp specialisation.
/* atrex:plan
# T <= CMIN: the token recurrence (pool copy, then a block per head and value slice).
[[launch]]
kernel = "gdr_pool_copy"
when = "T <= CMIN"
grid = ["min(4 * 132 * 8, ceil(S * Hv * K * V / (4 * 256)))"]
block = [256]
args = ["final_state", "initial_state", "initial_state_indices", "B:i32",
        "S:i64", "Hv * K * V:i64"]

[[launch]]
kernel = "gdr_update"
when = "T <= CMIN"
grid = ["B * Hv", "V // BV"]
block = ["BV * KS"]
smem = "(2 * TC * (2 * 128 + BV + 3) + TC * BV) * 4"
args = ["out", "final_state", "A_log", "a", "dt_bias", "q", "k", "v", "b", "initial_state",
        "initial_state_indices", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "scale:f32", "softplus_beta:f32", "softplus_threshold:f32", "use_qk_l2norm:i32"]

# T > CMIN: the chunked form. Launch 1 prepares every (head, chunk of 64 tokens) at once;
# launch 2 copies the untouched pool rows and runs each (head, 32 value columns) through its chunks.
[[launch]]
kernel = "gdr_chunk_prep"
when = "T > CMIN"
grid = ["B * Hv", "ceil(T / 64)"]
block = [256]
smem = "87040"
args = ["work", "A_log", "a", "dt_bias", "q", "k", "v", "b", "T:i32", "Hv:i32", "Hq:i32", "K:i32",
        "V:i32", "scale:f32", "softplus_beta:f32", "softplus_threshold:f32", "use_qk_l2norm:i32"]

[[launch]]
kernel = "gdr_chunk_scan"
when = "T > CMIN"
grid = ["B * Hv", "V // 32"]
block = [256]
smem = "190496"
args = ["out", "final_state", "work", "q", "k", "initial_state", "initial_state_indices",
        "B:i32", "S:i32", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32"]

[[scratch]]
name = "work"
dtype = "fp32"
size = "B * Hv * ceil(T / 64) * 20612"

[tune]
CMIN = [32, 0, 128]  # longest sequence run by the recurrence
SK = [1, 2]          # chunked scan: independent accumulator chains per product (ILP)
BV = [32, 16]        # recurrence: value columns per block
KS = [8, 4]          # recurrence: threads sharing one state column
TC = [32, 16]        # recurrence: tokens staged in shared memory per step
*/
// Gated delta rule (decode and prefill). T <= CMIN: the token recurrence of
// tpl-gated-delta-rule-update-prefetch (each state column over KS lanes, the state in registers,
// the next TC tokens staged while this step runs). T > CMIN: the chunked form below.
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

// ---------------------------------------------------------------------------------------------
// The chunked (WY) form for T > CMIN. Chunks of CH = 64 tokens; within a chunk (G = inclusive
// cumulative log-decay, β = sigmoid(b), k̂ and q̂ normalized, σ = scale, S the state before the
// chunk, K × V):
//   Δ = U − W·S,  U = (I + A)⁻¹·diag(β)·V,  W = (I + A)⁻¹·diag(β·e^G)·K̂,
//   A[i][j] = β_i·e^(G_i − G_j)·(k̂_i·k̂_j) for j < i;
//   O = diag(σ·e^G)·Q̂·S + Aqk·Δ,  Aqk[i][j] = σ·e^(G_i − G_j)·(q̂_i·k̂_j) for j ≤ i;
//   S ← e^(G_last)·S + K̃ᵀ·Δ,  K̃_j = e^(G_last − G_j)·k̂_j.
// Launch "prep" (a block per head and chunk, every chunk at once): W, U, Aqk and the per-token
// factors into scratch. The dot products come from the raw bf16 q and k on the tensor cores
// (exact in TF32, fp32 accumulation), scaled by the norms afterwards; (I + A) is solved one
// thread per column of [W | U], in blocks of 16 rows: the part below the diagonal blocks on the
// tensor cores, each 16 × 16 diagonal block by substitution in fp32. Launch "scan" (a block per
// head and 32 value columns): the chunks in order, three products per chunk on the tensor cores
// (mma.sync m16n8k8 TF32, fp32 accumulation) with the state kept exactly in fp32 accumulators
// across chunks; the next chunk's W, U, Aqk, q and k arrive by cp.async while this one runs.
// Operands whose values are bf16 (q and k) enter the products unrounded: the per-token factors
// go on the other side (q's on the output rows, k's on Δ), so the state's update rounds once.
// Within each 8-wide k step the fragments take k in the order (0, 4, 1, 5, 2, 6, 3, 7), the
// same for both operands, so a thread's two k values are adjacent in memory (one 8-byte load
// of fp32, one 4-byte load of bf16). Padding tokens of the last chunk have β = 0, γ = 0 and
// zero q/k, so they add nothing.
#ifndef SK
#define SK 1                  // accumulator sets per product in the scan's first phase (1 or 2)
#endif
#define CH 64                 // tokens per chunk
#define CBV 32                // value columns per scan block
#define FP 136                // fp32 pitch of 128-wide rows (8-byte fragment loads without conflicts)
#define AP 72                 // fp32 pitch of 64-wide rows
#define HP 136                // bf16 pitch of 128-wide rows
#define UP 36                 // fp32 pitch of the block's 32 columns of U
#define SP 68                 // fp32 pitch of the prep's A (read as broadcast float4)
#define XP 264                // fp32 pitch of the prep's solved rows (256 columns)
// Scratch per (batch·head, chunk), in floats: W [CH][KD] (bf16, in the first half of its space)
// and Aqk [CH][CH] (TF32-rounded), both in A-fragment order (16 × 8 tiles, row tiles outer, each
// tile 32 threads × 4 values); U [CH][128] (fp32, row-major), qfac [CH], kfac [CH], e^(G_last),
// 3 unused. W's precision barely reaches the result (Δ = U − W·S with W·S small beside U).
#define W_OFF 0
#define U_OFF (CH * KD)
#define AQ_OFF (2 * CH * KD)
#define F_OFF (2 * CH * KD + CH * CH)
#define PER (F_OFF + 2 * CH + 4)

__device__ __forceinline__ unsigned tf32_bits(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float tf32_round(float x) { return __uint_as_float(tf32_bits(x)); }

// d += a·b, m16n8k8, TF32 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_tf32(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// A pair of bf16 (low half first) as two TF32 operands: exact.
__device__ __forceinline__ unsigned bf_lo(unsigned u) { return u << 16; }
__device__ __forceinline__ unsigned bf_hi(unsigned u) { return u & 0xffff0000u; }
__device__ __forceinline__ unsigned ld_u32(const __nv_bfloat16* p) { return *reinterpret_cast<const unsigned*>(p); }
__device__ __forceinline__ float2 ld_f2(const float* p) { return *reinterpret_cast<const float2*>(p); }
#define U(x) __float_as_uint(x)

__device__ __forceinline__ void cp16(void* smem, const void* gmem, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int n = valid ? 16 : 0;  // 0: zero fill
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// q, k, v (bf16), A, the per-token scalars; then the substitution's 48 solved rows and the
// correction of one block, over q, k, v and beyond.
#define PREP_RAW (3 * CH * HP * 2)
#define PREP_X ((48 + 16) * XP * 4)
#define PREP_SMEM ((PREP_X > PREP_RAW ? PREP_X : PREP_RAW) + CH * SP * 4 + 8 * CH * 4)

extern "C" __global__ void __launch_bounds__(256) gdr_chunk_prep(
    float* __restrict__ work, const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
    const __nv_bfloat16* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ b, int T, int Hv, int Hq, int K, int V, float scale,
    float beta, float threshold, int use_l2) {
    if (K != KD || V != 128) __trap();
    extern __shared__ float4 smem4[];
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem4);  // [CH][HP] raw q
    __nv_bfloat16* ks = qs + CH * HP;                              // [CH][HP] raw k
    __nv_bfloat16* vs = ks + CH * HP;                              // [CH][HP] raw v of head m
    float* As = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(smem4) +
                                         (PREP_X > PREP_RAW ? PREP_X : PREP_RAW));  // [CH][SP] A
    float* gam = As + CH * SP;                                     // [CH] γ
    float* bet = gam + CH;                                         // [CH] β
    float* rnq = bet + CH;                                         // [CH] 1 / max(‖q‖, 1e-6)
    float* rnk = rnq + CH;
    float* Gs = rnk + CH;                                          // [CH] G
    float* ebk = Gs + CH;                                          // [CH] β·e^G / ‖k‖

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv, c = blockIdx.y;
    const int NC = gridDim.y;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const int t0 = c * CH;
    const int n = min(CH, T - t0);

    // Raw q, k and v rows of the chunk (zero past the end).
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int i = tid + 256 * u, row = i >> 4, c16 = i & 15;
        const bool ok = row < n;
        const long long g = ok ? (((long long)bi * T + t0 + row) * Hq + j) * KD + c16 * 8 : 0;
        const long long gv = ok ? (((long long)bi * T + t0 + row) * Hv + m) * (long long)V + c16 * 8 : 0;
        cp16(qs + row * HP + c16 * 8, q + g, ok);
        cp16(ks + row * HP + c16 * 8, k + g, ok);
        cp16(vs + row * HP + c16 * 8, v + gv, ok);
    }
    cp_commit();
    if (tid < CH) {
        float g = 0.f, w = 0.f;
        if (tid < n) {
            const long long gi = ((long long)bi * T + t0 + tid) * Hv + m;
            const float z = __bfloat162float(a[gi]) + __bfloat162float(dt_bias[m]);
            const float sp = (beta * z > threshold) ? z : log1pf(expf(beta * z)) / beta;
            g = -expf(A_log[m]) * sp;
            w = 1.0f / (1.0f + expf(-__bfloat162float(b[gi])));
        }
        gam[tid] = g;
        bet[tid] = w;
    }
    cp_wait0();
    __syncthreads();

    // Norms: two threads per row (q rows 0..63, then k rows), 64 elements each.
    {
        const int row = tid >> 1, h = tid & 1;
        const __nv_bfloat16* src = (row < CH ? qs + row * HP : ks + (row - CH) * HP) + 64 * h;
        float s = 0.f;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const uint4 w4 = *reinterpret_cast<const uint4*>(src + 8 * u);
            const unsigned wv[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float lo = __uint_as_float(bf_lo(wv[e])), hi = __uint_as_float(bf_hi(wv[e]));
                s = fmaf(lo, lo, fmaf(hi, hi, s));
            }
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        if (h == 0) {
            const float rn = use_l2 ? 1.0f / fmaxf(sqrtf(s), 1e-6f) : 1.0f;
            if (row < CH) rnq[row] = rn;
            else rnk[row - CH] = rn;
        }
    }
    if (warp == 0) {  // G = inclusive prefix sum of γ
        float g0 = gam[lane], g1 = gam[lane + 32];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u0 = __shfl_up_sync(0xffffffffu, g0, o), u1 = __shfl_up_sync(0xffffffffu, g1, o);
            if (lane >= o) {
                g0 += u0;
                g1 += u1;
            }
        }
        g1 += __shfl_sync(0xffffffffu, g0, 31);
        Gs[lane] = g0;
        Gs[lane + 32] = g1;
    }
    __syncthreads();
    if (tid < CH) ebk[tid] = bet[tid] * expf(Gs[tid]) * rnk[tid];

    // k·kᵀ and q·kᵀ of the raw rows (64 × 64, depth 128): warp = (16 rows, 32 columns).
    const int g8 = lane >> 2, t4 = lane & 3;
    {
        const int mt = warp & 3, nh = warp >> 2;
        float kk[4][4], qk[4][4];
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) kk[x][y] = qk[x][y] = 0.f;
        const int r0 = 16 * mt + g8;
#pragma unroll
        for (int s8 = 0; s8 < KD / 8; ++s8) {
            const int cc = 8 * s8 + 2 * t4;
            const unsigned k0 = ld_u32(ks + r0 * HP + cc), k1 = ld_u32(ks + (r0 + 8) * HP + cc);
            const unsigned q0 = ld_u32(qs + r0 * HP + cc), q1 = ld_u32(qs + (r0 + 8) * HP + cc);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const unsigned bk = ld_u32(ks + (32 * nh + 8 * nt + g8) * HP + cc);
                mma_tf32(kk[nt], bf_lo(k0), bf_lo(k1), bf_hi(k0), bf_hi(k1), bf_lo(bk), bf_hi(bk));
                mma_tf32(qk[nt], bf_lo(q0), bf_lo(q1), bf_hi(q0), bf_hi(q1), bf_lo(bk), bf_hi(bk));
            }
        }
        // Aqk goes out in the scan's A-fragment order: tile (16 rows, 8 columns) by tile, a
        // thread's four values together (rows g, g + 8; columns 2t, 2t + 1 of the tile).
        float* aqk = work + ((long long)blockIdx.x * NC + c) * PER + AQ_OFF;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            float qv[4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = r0 + 8 * h;
                const float gi = Gs[i], bki = bet[i] * rnk[i], sqi = scale * rnq[i];
                float av[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int jj = 32 * nh + 8 * nt + 2 * t4 + e;
                    const float d = (i >= jj) ? expf(gi - Gs[jj]) * rnk[jj] : 0.f;
                    av[e] = (i > jj) ? bki * d * kk[nt][2 * h + e] : 0.f;
                    qv[h + 2 * e] = tf32_round(sqi * d * qk[nt][2 * h + e]);
                }
                *reinterpret_cast<float2*>(As + i * SP + 32 * nh + 8 * nt + 2 * t4) = make_float2(av[0], av[1]);
            }
            *reinterpret_cast<float4*>(aqk + (mt * (CH / 8) + 4 * nh + nt) * 128 + lane * 4) =
                make_float4(qv[0], qv[1], qv[2], qv[3]);
        }
    }
    __syncthreads();

    // (I + A)·X = R, one column of [W | U] per thread (R = β·e^G·k̂ for W, columns 0..127; β·v
    // for U, 128..255), in blocks of 16 rows: block I first takes A[I][<I]·X[<I] off its rows on
    // the tensor cores (each warp for its own 32 columns, TF32, through shared memory), then
    // solves its 16 × 16 diagonal block by substitution in fp32 registers.
    float* dst = work + ((long long)blockIdx.x * NC + c) * PER;
    {
        const int col = tid;
        float x[CH];
        if (col < KD) {
#pragma unroll
            for (int i = 0; i < CH; ++i) x[i] = ebk[i] * __bfloat162float(ks[i * HP + col]);
        } else {
#pragma unroll
            for (int i = 0; i < CH; ++i) x[i] = bet[i] * __bfloat162float(vs[i * HP + col - KD]);
        }
        __syncthreads();  // q, k and v are read: their space holds X's first 48 rows now
        float* Xs = reinterpret_cast<float*>(qs);  // [48][XP] solved rows, fp32
        float* Cs = Xs + 48 * XP;                  // [16][XP] this block's correction
#pragma unroll
        for (int I = 0; I < CH / 16; ++I) {
            if (I > 0) {
                float cacc[4][4];
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) cacc[nt][e] = 0.f;
#pragma unroll
                for (int s8 = 0; s8 < 2 * I; ++s8) {
                    const float* ar = As + (16 * I + g8) * SP + 8 * s8 + t4;
                    const unsigned a0 = tf32_bits(ar[0]), a1 = tf32_bits(ar[8 * SP]);
                    const unsigned a2 = tf32_bits(ar[4]), a3 = tf32_bits(ar[8 * SP + 4]);
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt) {
                        const float* xb = Xs + (8 * s8 + t4) * XP + 32 * warp + 8 * nt + g8;
                        mma_tf32(cacc[nt], a0, a1, a2, a3, tf32_bits(xb[0]), tf32_bits(xb[4 * XP]));
                    }
                }
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        *reinterpret_cast<float2*>(Cs + (g8 + 8 * h) * XP + 32 * warp + 8 * nt + 2 * t4) =
                            make_float2(cacc[nt][2 * h], cacc[nt][2 * h + 1]);
                __syncwarp();
#pragma unroll
                for (int r = 0; r < 16; ++r) x[16 * I + r] -= Cs[r * XP + col];
                __syncwarp();  // Cs is rewritten by the next block
            }
#pragma unroll
            for (int r = 1; r < 16; ++r) {
                const int i = 16 * I + r;
                float s0 = x[i], s1 = 0.f;
#pragma unroll
                for (int jq = 0; jq < (r + 3) / 4; ++jq) {
                    const float4 a4 = *reinterpret_cast<const float4*>(As + i * SP + 16 * I + 4 * jq);
                    s0 = fmaf(-a4.x, x[16 * I + 4 * jq], s0);
                    if (4 * jq + 1 < r) s1 = fmaf(-a4.y, x[16 * I + 4 * jq + 1], s1);
                    if (4 * jq + 2 < r) s0 = fmaf(-a4.z, x[16 * I + 4 * jq + 2], s0);
                    if (4 * jq + 3 < r) s1 = fmaf(-a4.w, x[16 * I + 4 * jq + 3], s1);
                }
                x[i] = s0 + s1;
            }
            if (I < CH / 16 - 1) {
#pragma unroll
                for (int r = 0; r < 16; ++r) Xs[(16 * I + r) * XP + col] = x[16 * I + r];
                __syncwarp();  // the warp's mma reads its own columns only
            }
        }
        if (col < KD) {
#pragma unroll
            for (int i = 0; i < CH; ++i)  // bf16, A-fragment order, as Aqk
                reinterpret_cast<__nv_bfloat16*>(dst + W_OFF)[((i >> 4) * (KD / 8) + (col >> 3)) * 128 +
                                                              ((i & 7) * 4 + ((col & 7) >> 1)) * 4 +
                                                              ((i >> 3) & 1) + 2 * (col & 1)] =
                    __float2bfloat16_rn(x[i]);
        } else {
#pragma unroll
            for (int i = 0; i < CH; ++i) dst[U_OFF + i * 128 + (col - KD)] = x[i];
        }
    }
    if (tid < CH) {
        const int i = tid;
        dst[F_OFF + i] = (i < n) ? scale * expf(Gs[i]) * rnq[i] : 0.f;
        dst[F_OFF + CH + i] = (i < n) ? expf(Gs[CH - 1] - Gs[i]) * rnk[i] : 0.f;
        if (i == 0) dst[F_OFF + 2 * CH] = expf(Gs[CH - 1]);
    }
}

// Shared memory of the scan: two stages of a chunk's operands, then Sᵀ, Δᵀ and (kfac·Δ)ᵀ
// (TF32-rounded).
#define ST_W 0
#define ST_AQ (ST_W + CH * KD * 2)
#define ST_U (ST_AQ + CH * CH * 4)
#define ST_Q (ST_U + CH * UP * 4)
#define ST_K (ST_Q + CH * HP * 2)
#define ST_F (ST_K + CH * HP * 2)
#define STAGE (ST_F + (2 * CH + 4) * 4)
#define SCAN_ST (2 * STAGE)
#define SCAN_DT (SCAN_ST + CBV * FP * 4)
#define SCAN_DK (SCAN_DT + CBV * AP * 4)
#define SCAN_SMEM (SCAN_DK + CBV * AP * 4)
static_assert(STAGE % 16 == 0, "stages must stay 16-byte aligned");

__device__ __forceinline__ void scan_load(unsigned char* stg, const float* __restrict__ src,
                                          const __nv_bfloat16* __restrict__ q,
                                          const __nv_bfloat16* __restrict__ k, long long tokbase,
                                          int t0, int T, int Hq, int j, int v0) {
    const int tid = threadIdx.x;
    float* W = reinterpret_cast<float*>(stg + ST_W);
    float* Aq = reinterpret_cast<float*>(stg + ST_AQ);
    float* Us = reinterpret_cast<float*>(stg + ST_U);
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(stg + ST_Q);
    __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(stg + ST_K);
    float* F = reinterpret_cast<float*>(stg + ST_F);
#pragma unroll
    for (int u = 0; u < 4; ++u) cp16(W + (tid + 256 * u) * 4, src + W_OFF + (tid + 256 * u) * 4, true);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int i = tid + 256 * u, row = i >> 3, c4 = i & 7;
        cp16(Us + row * UP + c4 * 4, src + U_OFF + row * 128 + v0 + c4 * 4, true);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int i = tid + 256 * u, row = i >> 4, c4 = i & 15;
        cp16(Aq + i * 4, src + AQ_OFF + i * 4, true);
        const bool ok = t0 + row < T;
        const long long g = ok ? ((tokbase + t0 + row) * Hq + j) * KD + c4 * 8 : 0;
        cp16(qs + row * HP + c4 * 8, q + g, ok);
        cp16(ks + row * HP + c4 * 8, k + g, ok);
    }
    if (tid < (2 * CH + 4) / 4) cp16(F + tid * 4, src + F_OFF + tid * 4, true);
}

extern "C" __global__ void __launch_bounds__(256, 1) gdr_chunk_scan(
    __nv_bfloat16* __restrict__ out, float* __restrict__ final_state, const float* __restrict__ work,
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
    const float* __restrict__ initial_state, const int* __restrict__ initial_state_indices, int B,
    int S, int T, int Hv, int Hq, int K, int V) {
    if (K != KD || V != 128) __trap();
    extern __shared__ float4 smem4[];
    unsigned char* sm = reinterpret_cast<unsigned char*>(smem4);
    float* ST = reinterpret_cast<float*>(sm + SCAN_ST);  // [CBV][FP]: Sᵀ
    float* DT = reinterpret_cast<float*>(sm + SCAN_DT);  // [CBV][AP]: Δᵀ
    float* DK = reinterpret_cast<float*>(sm + SCAN_DK);  // [CBV][AP]: (kfac·Δ)ᵀ

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g8 = lane >> 2, t4 = lane & 3;
    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv;
    const int v0 = blockIdx.y * CBV;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const int NC = (T + CH - 1) / CH;
    const long long tokbase = (long long)bi * T;
    const float* wbase = work + (long long)blockIdx.x * NC * PER;
    const long long row = initial_state_indices[bi];

    scan_load(sm, wbase, q, k, tokbase, 0, T, Hq, j, v0);
    cp_commit();

    // The state: warp w holds rows 16w..16w+15 of S (K × CBV) exactly, as the accumulators of
    // the update product, whose fragment row g is state row 16w + 2g and row g + 8 is 16w + 2g + 1
    // (so that a thread's two k values of a token are adjacent bf16).
    const int kr0 = 16 * warp + 2 * g8;
    float sacc[4][4];
    {
        const float* h0 = initial_state + (row * Hv + m) * (long long)KD * V + v0;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int cn = 8 * nt + 2 * t4;
                const float2 s2 = *reinterpret_cast<const float2*>(h0 + (long long)(kr0 + h) * V + cn);
                sacc[nt][2 * h] = s2.x;
                sacc[nt][2 * h + 1] = s2.y;
                ST[cn * FP + kr0 + h] = tf32_round(s2.x);
                ST[(cn + 1) * FP + kr0 + h] = tf32_round(s2.y);
            }
    }

    // The untouched rows of the pool, spread over every block, while chunk 0 is on its way:
    // rounds of eight float4 per thread, all eight loads before the stores.
    {
        const long long row4 = (long long)Hv * KD * V / 4, n4 = S * row4;
        const long long step = (long long)gridDim.x * gridDim.y * 256;
        const long long first = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * 256 + tid;
        const float4* src4 = reinterpret_cast<const float4*>(initial_state);
        float4* dst4 = reinterpret_cast<float4*>(final_state);
        unsigned long long touched = 0;  // pool rows < 64 that launch writes (the usual case)
#pragma unroll 1
        for (int bb = 0; bb < B; ++bb) {
            const int s = initial_state_indices[bb];
            if (s >= 0 && s < 64) touched |= 1ull << s;
        }
        for (long long i0 = first; i0 < n4; i0 += 8 * step) {
            float4 buf[8];
            bool keep[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const long long i = i0 + u * step;
                keep[u] = i < n4;
                if (keep[u]) {
                    const long long s = i / row4;
                    if (s < 64) {
                        keep[u] = !((touched >> s) & 1);
                    } else {
#pragma unroll 1
                        for (int bb = 0; bb < B; ++bb) keep[u] &= (initial_state_indices[bb] != s);
                    }
                }
                if (keep[u]) buf[u] = __ldg(src4 + i);
            }
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (keep[u]) dst4[i0 + u * step] = buf[u];
        }
    }
    const int mt = warp & 3, nh = warp >> 2;  // products with 64 token rows: (16 rows, 16 columns)
    const int r0 = 16 * mt + g8;
    // Two barriers per chunk. Phase 1 (needs S): W·S and q·S together, sharing S's fragments;
    // Δ = U − W·S goes to shared memory. Phase 2 (needs Δ): Aqk·Δ and the state update, whose
    // new S is written at once: every read of the old S was in phase 1, before the barrier.
    for (int c = 0; c < NC; ++c) {
        cp_wait0();
        __syncthreads();  // chunk c has landed; chunk c − 1 is done with its stage, Sᵀ is new
        if (c + 1 < NC)
            scan_load(sm + ((c + 1) & 1) * STAGE, wbase + (long long)(c + 1) * PER, q, k, tokbase,
                      (c + 1) * CH, T, Hq, j, v0);
        cp_commit();
        const unsigned char* stg = sm + (c & 1) * STAGE;
        const float* W = reinterpret_cast<const float*>(stg + ST_W);
        const float* Aq = reinterpret_cast<const float*>(stg + ST_AQ);
        const float* Us = reinterpret_cast<const float*>(stg + ST_U);
        const __nv_bfloat16* qs = reinterpret_cast<const __nv_bfloat16*>(stg + ST_Q);
        const __nv_bfloat16* ks = reinterpret_cast<const __nv_bfloat16*>(stg + ST_K);
        const float* F = reinterpret_cast<const float*>(stg + ST_F);

        float aq[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        {
            float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#if SK == 2
            float acc2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
            float aq2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#endif
            const __nv_bfloat16* Wl = reinterpret_cast<const __nv_bfloat16*>(W) + mt * (KD / 8) * 128 + lane * 4;
            const __nv_bfloat16* ql = qs + r0 * HP + 2 * t4;
            const float* Sl = ST + (16 * nh + g8) * FP + 2 * t4;
#pragma unroll
            for (int s8 = 0; s8 < KD / 8; ++s8) {
                const uint2 wa = *reinterpret_cast<const uint2*>(Wl + s8 * 128);
                const unsigned q0 = ld_u32(ql + 8 * s8), q1 = ld_u32(ql + 8 * HP + 8 * s8);
#pragma unroll
                for (int nt = 0; nt < 2; ++nt) {
                    const float2 sb = ld_f2(Sl + 8 * nt * FP + 8 * s8);
#if SK == 2
                    if (s8 & 1) {
                        mma_tf32(acc2[nt], bf_lo(wa.x), bf_hi(wa.x), bf_lo(wa.y), bf_hi(wa.y), U(sb.x), U(sb.y));
                        mma_tf32(aq2[nt], bf_lo(q0), bf_lo(q1), bf_hi(q0), bf_hi(q1), U(sb.x), U(sb.y));
                        continue;
                    }
#endif
                    mma_tf32(acc[nt], bf_lo(wa.x), bf_hi(wa.x), bf_lo(wa.y), bf_hi(wa.y), U(sb.x), U(sb.y));
                    mma_tf32(aq[nt], bf_lo(q0), bf_lo(q1), bf_hi(q0), bf_hi(q1), U(sb.x), U(sb.y));
                }
            }
#if SK == 2
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    acc[nt][e] += acc2[nt][e];
                    aq[nt][e] += aq2[nt][e];
                }
#endif
            const float kf0 = F[CH + r0], kf1 = F[CH + r0 + 8];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = r0 + 8 * (e >> 1), cn = 16 * nh + 8 * nt + 2 * t4 + (e & 1);
                    const float d = Us[i * UP + cn] - acc[nt][e];
                    DT[cn * AP + i] = tf32_round(d);
                    DK[cn * AP + i] = tf32_round(d * ((e >> 1) ? kf1 : kf0));
                }
        }
        __syncthreads();  // Δ is complete

        // O = diag(qfac)·(q·S) + Aqk·Δ (rows past T are not stored)
        {
            float ad[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
            const float* Al = Aq + mt * (CH / 8) * 128 + lane * 4;
            const float* Dl = DT + (16 * nh + g8) * AP + 2 * t4;
#pragma unroll
            for (int s8 = 0; s8 < CH / 8; ++s8) {
                if (s8 <= 2 * mt + 1) {  // Aqk is lower triangular
                    const float4 aa = *reinterpret_cast<const float4*>(Al + s8 * 128);
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt) {
                        const float2 db = ld_f2(Dl + 8 * nt * AP + 8 * s8);
                        mma_tf32(ad[nt], U(aa.x), U(aa.y), U(aa.z), U(aa.w), U(db.x), U(db.y));
                    }
                }
            }
            const float qf0 = F[r0], qf1 = F[r0 + 8];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int i = r0 + 8 * h, tok = c * CH + i;
                    const float qf = h ? qf1 : qf0;
                    if (tok < T) {
                        const int cn = v0 + 16 * nh + 8 * nt + 2 * t4;
                        *reinterpret_cast<__nv_bfloat162*>(out + ((tokbase + tok) * Hv + m) * (long long)V + cn) =
                            __floats2bfloat162_rn(fmaf(aq[nt][2 * h], qf, ad[nt][2 * h]),
                                                  fmaf(aq[nt][2 * h + 1], qf, ad[nt][2 * h + 1]));
                    }
                }
        }

        // S ← e^(G_last)·S + kᵀ·(kfac·Δ), k raw (exact in TF32); then its TF32 copy.
        {
            const float eg = F[2 * CH];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) sacc[nt][e] *= eg;
            const __nv_bfloat16* kl = ks + 2 * t4 * HP + kr0;
            const float* Dl = DK + g8 * AP + 2 * t4;
#pragma unroll
            for (int s8 = 0; s8 < CH / 8; ++s8) {
                const unsigned u0 = ld_u32(kl + 8 * s8 * HP), u1 = ld_u32(kl + (8 * s8 + 1) * HP);
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    const float2 db = ld_f2(Dl + 8 * nt * AP + 8 * s8);
                    mma_tf32(sacc[nt], bf_lo(u0), bf_hi(u0), bf_lo(u1), bf_hi(u1), U(db.x), U(db.y));
                }
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int cn = 8 * nt + 2 * t4 + (e & 1);
                    ST[cn * FP + kr0 + (e >> 1)] = tf32_round(sacc[nt][e]);
                }
        }
    }

    float* hf = final_state + (row * Hv + m) * (long long)KD * V + v0;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int cn = 8 * nt + 2 * t4;
            *reinterpret_cast<float2*>(hf + (long long)(kr0 + h) * V + cn) = make_float2(sacc[nt][2 * h], sacc[nt][2 * h + 1]);
        }
}
#undef U

static_assert(PER == 20612, "the plan's scratch size per chunk");
static_assert(PREP_SMEM == 87040, "the plan's smem of gdr_chunk_prep");
static_assert(SCAN_SMEM == 190496, "the plan's smem of gdr_chunk_scan");
