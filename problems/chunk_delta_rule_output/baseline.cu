/* atrex:plan
[[launch]]
kernel = "chunk_o"
grid = ["N", "Hv * (V // VB)", "B"]
block = [128]
smem = "4 * 64 * 136 + 384 * (VB + 8) + 256"
args = ["out", "q", "k", "v", "h", "g", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "Cs:i32", "scale:f32"]

[tune]
VB = [128, 64]     # value columns per block (64: twice the blocks, scores recomputed)
MINB = [1, 2]      # minimum resident blocks per SM for __launch_bounds__
*/
// Baseline chunked gated delta-rule output (FLA chunk_fwd_o) with bf16 mma.sync m16n8k16.
// One block of 4 warps per (chunk, value head, VB value columns); warp w owns the chunk's tokens
// 16w..16w+15. Q, K (first cp.async group) and the chunk's state h and V (second group) are
// staged in padded shared memory, zero-filled past T. Per warp:
//   S = Q·Kᵀ (only the key tiles s ≤ t), gated in registers to A = bf16(S·exp(g_t − g_s)) where
//   s ≤ t and g_t ≤ g_s, else 0 (the accumulator layout is reused as the A operand);
//   O = exp(g_t)·(Q·h) + A·V, out = bf16(σ·O) for the rows below T.
#include <cuda_bf16.h>

#ifndef VB
#define VB 128
#endif
#ifndef MINB
#define MINB 1
#endif
#define KD 128
#define CS 64
#define QST 136          // padded row stride (bf16) of Q and K
#define VST (VB + 8)     // padded row stride of h and V

static_assert(VB % 16 == 0, "VB must be a multiple of 16");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldm_x4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldm_x4_t(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

extern "C" __global__ void __launch_bounds__(128, MINB) chunk_o(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ h, const float* __restrict__ g, int T, int Hv, int Hq,
    int K, int V, int Cs, float scale) {
    if (K != KD || Cs != CS || (V % VB) != 0) __trap();
    extern __shared__ uint4 smem_u4[];
    __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem_u4);  // [CS][QST]
    __nv_bfloat16* Ks = Qs + CS * QST;                               // [CS][QST]
    __nv_bfloat16* Hs = Ks + CS * QST;                               // [KD][VST]
    __nv_bfloat16* Vs = Hs + KD * VST;                               // [CS][VST]
    float* gs = reinterpret_cast<float*>(Vs + CS * VST);             // [CS]

    const int c = blockIdx.x;
    const int nvt = V / VB;
    const int m = blockIdx.y / nvt, v0 = (blockIdx.y % nvt) * VB;
    const int bi = blockIdx.z;
    const int N = gridDim.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, qq = lane & 3;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const int t0 = c * CS;
    const long long tokb = (long long)bi * T;

    // Group 0: Q, K tiles; g. Group 1: h and V tiles.
#pragma unroll
    for (int i = 0; i < (CS * KD / 8) / 128; ++i) {
        const int s = tid + 128 * i;
        const int tt = s / (KD / 8), seg = s % (KD / 8);
        const bool valid = t0 + tt < T;
        const long long tok = tokb + (valid ? t0 + tt : 0);
        cp_async16(Qs + tt * QST + seg * 8, q + (tok * Hq + j) * KD + seg * 8, valid);
        cp_async16(Ks + tt * QST + seg * 8, k + (tok * Hq + j) * KD + seg * 8, valid);
    }
    cp_async_commit();
    {
        const __nv_bfloat16* hc = h + ((((long long)bi * N + c) * Hv + m) * KD) * V + v0;
        for (int s = tid; s < KD * (VB / 8); s += 128) {
            const int kr = s / (VB / 8), seg = s % (VB / 8);
            cp_async16(Hs + kr * VST + seg * 8, hc + (long long)kr * V + seg * 8, true);
        }
        for (int s = tid; s < CS * (VB / 8); s += 128) {
            const int tt = s / (VB / 8), seg = s % (VB / 8);
            const bool valid = t0 + tt < T;
            const long long tok = tokb + (valid ? t0 + tt : 0);
            cp_async16(Vs + tt * VST + seg * 8, v + (tok * Hv + m) * V + v0 + seg * 8, valid);
        }
        cp_async_commit();
    }
    if (tid < CS) gs[tid] = (t0 + tid < T) ? g[(tokb + t0 + tid) * Hv + m] : 0.0f;
    cp_async_wait<1>();
    __syncthreads();

    // Q fragments of this warp's 16 rows, all 8 k-steps (reused for Q·h).
    unsigned qa[KD / 16][4];
#pragma unroll
    for (int ks = 0; ks < KD / 16; ++ks)
        ldm_x4(qa[ks], Qs + (16 * warp + (lane & 15)) * QST + 16 * ks + (lane >> 4) * 8);

    // S = Q·Kᵀ over key tiles s < 16·(warp + 1).
    float S[CS / 8][4];
#pragma unroll
    for (int nt = 0; nt < CS / 8; ++nt) S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.0f;
#pragma unroll
    for (int np = 0; np < CS / 16; ++np) {
        if (np > warp) break;
#pragma unroll
        for (int ks = 0; ks < KD / 16; ++ks) {
            unsigned bb[4];
            ldm_x4(bb, Ks + (16 * np + (lane & 7) + (lane >> 4) * 8) * QST + 16 * ks + ((lane >> 3) & 1) * 8);
            mma16816(S[2 * np], qa[ks], bb[0], bb[1]);
            mma16816(S[2 * np + 1], qa[ks], bb[2], bb[3]);
        }
    }

    // Gate, mask and round: A as bf16 A-operand fragments (k-step = 16 keys).
    unsigned pa[CS / 16][4];
    float gt[2];
    gt[0] = gs[16 * warp + gq];
    gt[1] = gs[16 * warp + gq + 8];
#pragma unroll
    for (int nt = 0; nt < CS / 8; ++nt) {
        float a4[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int tr = 16 * warp + gq + 8 * (e >> 1);
            const int sc = 8 * nt + 2 * qq + (e & 1);
            const float d = gt[e >> 1] - gs[sc];
            a4[e] = (sc <= tr && d <= 0.0f) ? S[nt][e] * expf(d) : 0.0f;
        }
        pa[nt >> 1][(nt & 1) * 2 + 0] = pack_bf16(a4[0], a4[1]);
        pa[nt >> 1][(nt & 1) * 2 + 1] = pack_bf16(a4[2], a4[3]);
    }

    cp_async_wait<0>();
    __syncthreads();

    // O = Q·h, scaled by exp(g_t), then O += A·V.
    float O[VB / 8][4];
#pragma unroll
    for (int nt = 0; nt < VB / 8; ++nt) O[nt][0] = O[nt][1] = O[nt][2] = O[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KD / 16; ++ks) {
#pragma unroll
        for (int np = 0; np < VB / 16; ++np) {
            unsigned bb[4];
            ldm_x4_t(bb, Hs + (16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8) * VST + 16 * np + (lane >> 4) * 8);
            mma16816(O[2 * np], qa[ks], bb[0], bb[1]);
            mma16816(O[2 * np + 1], qa[ks], bb[2], bb[3]);
        }
    }
    const float e0 = expf(gt[0]), e1 = expf(gt[1]);
#pragma unroll
    for (int nt = 0; nt < VB / 8; ++nt) {
        O[nt][0] *= e0; O[nt][1] *= e0;
        O[nt][2] *= e1; O[nt][3] *= e1;
    }
#pragma unroll
    for (int ks = 0; ks < CS / 16; ++ks) {
        if (ks > warp) break;
#pragma unroll
        for (int np = 0; np < VB / 16; ++np) {
            unsigned bb[4];
            ldm_x4_t(bb, Vs + (16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8) * VST + 16 * np + (lane >> 4) * 8);
            mma16816(O[2 * np], pa[ks], bb[0], bb[1]);
            mma16816(O[2 * np + 1], pa[ks], bb[2], bb[3]);
        }
    }

#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        const int t = t0 + 16 * warp + gq + 8 * hh;
        if (t >= T) continue;
        __nv_bfloat16* orow = out + ((tokb + t) * Hv + m) * V + v0;
#pragma unroll
        for (int nt = 0; nt < VB / 8; ++nt)
            *reinterpret_cast<unsigned*>(orow + 8 * nt + 2 * qq) =
                pack_bf16(scale * O[nt][2 * hh], scale * O[nt][2 * hh + 1]);
    }
}
