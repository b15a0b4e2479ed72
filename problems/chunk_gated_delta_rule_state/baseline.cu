/* atrex:plan
[[launch]]
kernel = "cgdr_pool_copy"
grid = ["min(132 * 16, ceil(S * Hv * K * V / (4 * 256)))"]
block = [256]
args = ["final_state", "initial_state", "initial_state_indices", "B:i32",
        "S:i64", "Hv * K * V:i64"]

[[launch]]
kernel = "cgdr_state"
grid = ["B * Hv", "V // BV"]
block = [128]
smem = "4 * 64 * 136 * 2 + 384 * (BV + 8)"
args = ["h", "v_new", "final_state", "k", "w", "u", "g", "initial_state",
        "initial_state_indices", "T:i32", "Hv:i32", "Hk:i32", "K:i32", "V:i32", "Cs:i32"]

[tune]
BV = [32, 64, 16]   # value columns of the state per block (the recurrence is independent per column)
*/
// Baseline chunk-recurrent state pass (FLA chunk_gated_delta_rule_fwd_h), bf16 tensor cores.
// Launch 1: float4 grid-stride copy of the state pool, skipping the rows launch 2 overwrites.
// Launch 2: one block of 4 warps per (batch, value head, BV state columns). The fp32 state
// slice H[128][BV] lives in mma accumulators (warp w owns key rows 32w..32w+31). Per 64-token
// chunk: the W and K tiles are prefetched with cp.async (double buffer, zero-filled past T);
// bf16(H) goes to shared memory (also stored as h); vb = U − W·bf16(H) with mma.sync m16n8k16
// (warp w owns tokens 16w..16w+15), v_new = bf16(vb), vs = bf16(vb·f) to shared memory;
// then H = H·exp(g_L) + Kᵀ·vs with Kᵀ fragments from ldmatrix.trans.
#include <cuda_bf16.h>

#ifndef BV
#define BV 32
#endif
#define KD 128
#define CS 64
#define WST 136            // padded row stride (bf16) of the W and K tiles
#define HST (BV + 8)       // padded row stride of bf16(H) and vs

static_assert(BV % 16 == 0, "BV must be a multiple of 16");

extern "C" __global__ void cgdr_pool_copy(float* __restrict__ dst, const float* __restrict__ src,
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

extern "C" __global__ void __launch_bounds__(128) cgdr_state(
    __nv_bfloat16* __restrict__ h_out, __nv_bfloat16* __restrict__ v_new,
    float* __restrict__ final_state, const __nv_bfloat16* __restrict__ k,
    const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ u,
    const float* __restrict__ g, const float* __restrict__ initial_state,
    const int* __restrict__ initial_state_indices, int T, int Hv, int Hk, int K, int V, int Cs) {
    if (K != KD || Cs != CS || (V % BV) != 0) __trap();
    extern __shared__ uint4 smem_u4[];
    __nv_bfloat16* Ws = reinterpret_cast<__nv_bfloat16*>(smem_u4);   // [2][CS][WST]
    __nv_bfloat16* Ks = Ws + 2 * CS * WST;                            // [2][CS][WST]
    __nv_bfloat16* Hbs = Ks + 2 * CS * WST;                           // [KD][HST]
    __nv_bfloat16* VSs = Hbs + KD * HST;                              // [CS][HST]

    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv;
    const int v0 = blockIdx.y * BV;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, qq = lane & 3;
    const int r = max(Hv / Hk, 1);
    const int j = min(m / r, Hk - 1);
    const int N = (T + CS - 1) / CS;
    const long long row = initial_state_indices[bi];
    const long long tokb = (long long)bi * T;

    // State fragments: H[mt][nt] covers key rows 32·warp + 16·mt + {gq, gq+8}, columns 8·nt + 2·qq + {0,1}.
    float H[2][BV / 8][4];
    const float* h0 = initial_state + ((row * Hv + m) * KD) * (long long)V + v0;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < BV / 8; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int kr = 32 * warp + 16 * mt + gq + 8 * hh;
                const float2 f = *reinterpret_cast<const float2*>(h0 + (long long)kr * V + 8 * nt + 2 * qq);
                H[mt][nt][2 * hh] = f.x;
                H[mt][nt][2 * hh + 1] = f.y;
            }

    auto prefetch = [&](int c, int buf) {
        const int t0 = c * CS;
#pragma unroll
        for (int i = 0; i < (CS * KD / 8) / 128; ++i) {
            const int s = tid + 128 * i;
            const int tt = s / (KD / 8), seg = s % (KD / 8);
            const bool valid = t0 + tt < T;
            const long long tok = tokb + (valid ? t0 + tt : 0);
            cp_async16(Ws + (buf * CS + tt) * WST + seg * 8, w + (tok * Hv + m) * KD + seg * 8, valid);
            cp_async16(Ks + (buf * CS + tt) * WST + seg * 8, k + (tok * Hk + j) * KD + seg * 8, valid);
        }
        cp_async_commit();
    };

    prefetch(0, 0);
    for (int c = 0; c < N; ++c) {
        const int buf = c & 1;
        const int t0 = c * CS;
        const int tL = min(T, t0 + CS) - 1;
        if (c + 1 < N) prefetch(c + 1, buf ^ 1);
        // bf16(H) to shared memory.
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < BV / 8; ++nt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int kr = 32 * warp + 16 * mt + gq + 8 * hh;
                    *reinterpret_cast<unsigned*>(Hbs + kr * HST + 8 * nt + 2 * qq) =
                        pack_bf16(H[mt][nt][2 * hh], H[mt][nt][2 * hh + 1]);
                }
        if (c + 1 < N) cp_async_wait<1>(); else cp_async_wait<0>();
        __syncthreads();

        // h[b, c, m] = bf16(H), 16-byte stores.
        {
            __nv_bfloat16* hc = h_out + ((((long long)bi * N + c) * Hv + m) * KD) * V + v0;
            for (int s = tid; s < KD * (BV / 8); s += 128) {
                const int kr = s / (BV / 8), seg = s % (BV / 8);
                *reinterpret_cast<uint4*>(hc + (long long)kr * V + seg * 8) =
                    *reinterpret_cast<const uint4*>(Hbs + kr * HST + seg * 8);
            }
        }

        // vb = U − W·bf16(H): warp owns tokens 16·warp .. +15, all BV columns.
        float acc[BV / 8][4];
#pragma unroll
        for (int nt = 0; nt < BV / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
        const __nv_bfloat16* Wb = Ws + buf * CS * WST;
#pragma unroll
        for (int ks = 0; ks < KD / 16; ++ks) {
            unsigned a[4];
            ldm_x4(a, Wb + (16 * warp + (lane & 15)) * WST + 16 * ks + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < BV / 16; ++np) {
                unsigned bb[4];
                ldm_x4_t(bb, Hbs + (16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8) * HST + 16 * np + (lane >> 4) * 8);
                mma16816(acc[2 * np], a, bb[0], bb[1]);
                mma16816(acc[2 * np + 1], a, bb[2], bb[3]);
            }
        }
        const float gLv = g[(tokb + tL) * Hv + m];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int tr = 16 * warp + gq + 8 * hh;
            const int t = t0 + tr;
            const bool valid = t < T;
            float f = 0.0f;
            if (valid) {
                const float d = gLv - g[(tokb + t) * Hv + m];
                f = d <= 0.0f ? expf(d) : 0.0f;
            }
#pragma unroll
            for (int nt = 0; nt < BV / 8; ++nt) {
                const int n = 8 * nt + 2 * qq;
                unsigned vsp = 0u;
                if (valid) {
                    const long long off = ((tokb + t) * Hv + m) * V + v0 + n;
                    const float2 uu = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(u + off));
                    const float vb0 = uu.x - acc[nt][2 * hh], vb1 = uu.y - acc[nt][2 * hh + 1];
                    *reinterpret_cast<unsigned*>(v_new + off) = pack_bf16(vb0, vb1);
                    vsp = pack_bf16(vb0 * f, vb1 * f);
                }
                *reinterpret_cast<unsigned*>(VSs + tr * HST + n) = vsp;
            }
        }
        __syncthreads();

        // H = H·exp(g_L) + Kᵀ·vs: warp owns key rows 32·warp .. +31; contraction over the chunk.
        const float eL = expf(gLv);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < BV / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) H[mt][nt][e] *= eL;
        const __nv_bfloat16* Kb = Ks + buf * CS * WST;
#pragma unroll
        for (int ts = 0; ts < CS / 16; ++ts) {
            unsigned a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                ldm_x4_t(a[mt], Kb + (16 * ts + (lane & 7) + (lane >> 4) * 8) * WST + 32 * warp + 16 * mt +
                                    ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int np = 0; np < BV / 16; ++np) {
                unsigned bb[4];
                ldm_x4_t(bb, VSs + (16 * ts + (lane & 7) + ((lane >> 3) & 1) * 8) * HST + 16 * np + (lane >> 4) * 8);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma16816(H[mt][2 * np], a[mt], bb[0], bb[1]);
                    mma16816(H[mt][2 * np + 1], a[mt], bb[2], bb[3]);
                }
            }
        }
        __syncthreads();
    }

    float* hf = final_state + ((row * Hv + m) * KD) * (long long)V + v0;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < BV / 8; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int kr = 32 * warp + 16 * mt + gq + 8 * hh;
                *reinterpret_cast<float2*>(hf + (long long)kr * V + 8 * nt + 2 * qq) =
                    make_float2(H[mt][nt][2 * hh], H[mt][nt][2 * hh + 1]);
            }
}
