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
smem = "TC * (2 * 128 + 2 * BV + 2) * 4"
args = ["out", "final_state", "A_log", "a", "dt_bias", "q", "k", "v", "b", "initial_state",
        "initial_state_indices", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "scale:f32", "softplus_beta:f32", "softplus_threshold:f32", "use_qk_l2norm:i32"]

[tune]
BV = [32, 16, 64]   # value columns per block
KS = [4, 8, 2]      # threads sharing one state column (each holds 128 / KS rows)
TC = [32, 16, 64]   # tokens staged in shared memory per step
*/
// Baseline gated delta rule (token-recurrent decode / short prefill).
// Launch 1: float4 grid-stride copy of the state pool into final_state, skipping the rows that
// launch 2 overwrites. Launch 2: one block per (batch, value head, BV value columns); each state
// column is split over KS adjacent lanes (rows interleaved in float4 groups, conflict-free
// shared-memory reads), so the state tile K×BV stays in registers for the whole sequence.
// Every TC tokens the block stages L2-normalized q̂·σ and k̂ (fp32), v and the gates
// (exp(γ), sigmoid(b)) in shared memory (warp per token, 8-byte loads, shuffle reductions), then
// runs TC recurrence steps with KS-lane shuffle reductions and no block barrier; outputs are
// buffered in shared memory and stored as 16-byte bf16 vectors.
#include <cuda_bf16.h>

#ifndef BV
#define BV 32
#endif
#ifndef KS
#define KS 4
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

__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
    for (int o = KS / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
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
    float* qs = smem;                    // [TC][KD]  q̂·σ
    float* kss = qs + TC * KD;           // [TC][KD]  k̂
    float* vs = kss + TC * KD;           // [TC][BV]
    float* os = vs + TC * BV;            // [TC][BV]
    float* dec = os + TC * BV;           // [TC] exp(γ)
    float* wbs = dec + TC;               // [TC] sigmoid(b)

    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv;
    const int v0 = blockIdx.y * BV;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = tid / KS, kq = tid % KS;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const long long row = initial_state_indices[bi];

    // State tile: rows 4·(kq + KS·i) + e of column v0 + c.
    float h[G4][4];
    const float* h0 = initial_state + ((row * Hv + m) * KD) * (long long)V + v0 + c;
#pragma unroll
    for (int i = 0; i < G4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) h[i][e] = h0[(long long)(4 * (kq + KS * i) + e) * V];

    const float A = expf(A_log[m]);
    const float dtb = __bfloat162float(dt_bias[m]);

    for (int t0 = 0; t0 < T; t0 += TC) {
        const int n = min(TC, T - t0);
        const long long tok0 = (long long)bi * T + t0;
        // Stage q̂·σ, k̂ (one warp per token, 4 elements per lane).
        for (int tt = warp; tt < n; tt += NT / 32) {
            const long long base = ((tok0 + tt) * Hq + j) * KD + lane * 4;
            const uint2 qp = __ldg(reinterpret_cast<const uint2*>(q + base));
            const uint2 kp = __ldg(reinterpret_cast<const uint2*>(k + base));
            const __nv_bfloat162* q2 = reinterpret_cast<const __nv_bfloat162*>(&qp);
            const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kp);
            const float2 qa = __bfloat1622float2(q2[0]), qb = __bfloat1622float2(q2[1]);
            const float2 ka = __bfloat1622float2(k2[0]), kb = __bfloat1622float2(k2[1]);
            float qn = 1.0f, kn = 1.0f;
            if (use_l2) {
                qn = fmaxf(sqrtf(warp_sum(qa.x * qa.x + qa.y * qa.y + qb.x * qb.x + qb.y * qb.y)), 1e-6f);
                kn = fmaxf(sqrtf(warp_sum(ka.x * ka.x + ka.y * ka.y + kb.x * kb.x + kb.y * kb.y)), 1e-6f);
            }
            reinterpret_cast<float4*>(qs + tt * KD)[lane] =
                make_float4(qa.x / qn * scale, qa.y / qn * scale, qb.x / qn * scale, qb.y / qn * scale);
            reinterpret_cast<float4*>(kss + tt * KD)[lane] =
                make_float4(ka.x / kn, ka.y / kn, kb.x / kn, kb.y / kn);
        }
        // Stage v for this block's columns (8 bf16 per thread and step).
        for (int i = tid; i < n * (BV / 8); i += NT) {
            const int tt = i / (BV / 8), c8 = i % (BV / 8);
            const uint4 p = __ldg(reinterpret_cast<const uint4*>(v + ((tok0 + tt) * Hv + m) * V + v0 + c8 * 8));
            const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 f = __bfloat1622float2(p2[e]);
                vs[tt * BV + c8 * 8 + 2 * e] = f.x;
                vs[tt * BV + c8 * 8 + 2 * e + 1] = f.y;
            }
        }
        // Gates.
        for (int tt = tid; tt < n; tt += NT) {
            const long long g = (tok0 + tt) * Hv + m;
            const float z = __bfloat162float(a[g]) + dtb;
            const float sp = (beta * z > threshold) ? z : log1pf(expf(beta * z)) / beta;
            dec[tt] = expf(-A * sp);
            wbs[tt] = 1.0f / (1.0f + expf(-__bfloat162float(b[g])));
        }
        __syncthreads();

        for (int tt = 0; tt < n; ++tt) {
            const float d = dec[tt];
            const float4* k4 = reinterpret_cast<const float4*>(kss + tt * KD);
            const float4* q4 = reinterpret_cast<const float4*>(qs + tt * KD);
            float p = 0.0f;
#pragma unroll
            for (int i = 0; i < G4; ++i) {
                const float4 kk = k4[kq + KS * i];
                h[i][0] *= d; h[i][1] *= d; h[i][2] *= d; h[i][3] *= d;
                p += h[i][0] * kk.x + h[i][1] * kk.y + h[i][2] * kk.z + h[i][3] * kk.w;
            }
            p = group_sum(p);
            const float delta = (vs[tt * BV + c] - p) * wbs[tt];
            float o = 0.0f;
#pragma unroll
            for (int i = 0; i < G4; ++i) {
                const float4 kk = k4[kq + KS * i];
                const float4 qq = q4[kq + KS * i];
                h[i][0] += kk.x * delta; h[i][1] += kk.y * delta;
                h[i][2] += kk.z * delta; h[i][3] += kk.w * delta;
                o += h[i][0] * qq.x + h[i][1] * qq.y + h[i][2] * qq.z + h[i][3] * qq.w;
            }
            o = group_sum(o);
            if (kq == 0) os[tt * BV + c] = o;
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
    }

    float* hf = final_state + ((row * Hv + m) * KD) * (long long)V + v0 + c;
#pragma unroll
    for (int i = 0; i < G4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) hf[(long long)(4 * (kq + KS * i) + e) * V] = h[i][e];
}
