/* atrex:plan
[[launch]]
kernel = "moe_route"
grid = ["E"]
block = [1024]
args = ["topk_ids", "topk_weights", "tok", "wgt", "slot_pos", "cnt", "T:i32", "K:i32"]

[[launch]]
kernel = "moe_schedule"
grid = [1]
block = [32]
args = ["cnt", "off", "tiles", "E:i32"]

[[launch]]
kernel = "moe_gemm1"
grid = ["ceil(I / 64)", "ceil(T * min(K, E) / 128) + E"]
block = [256]
args = ["hidden_states", "w1", "tok", "cnt", "off", "tiles", "z_hi", "z_lo", "T:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "moe_gemm2"
grid = ["ceil(H / 128)", "ceil(T * min(K, E) / 128) + E"]
block = [256]
args = ["z_hi", "z_lo", "w2", "cnt", "off", "tiles", "y", "H:i32", "I:i32"]

[[launch]]
kernel = "moe_combine"
grid = ["ceil(T * H / 4 / COMBINE_THREADS)"]
block = ["COMBINE_THREADS"]
args = ["out", "y", "topk_ids", "wgt", "slot_pos", "off", "T:i32", "H:i32", "K:i32"]

[[scratch]]
name = "tok"
dtype = "int32"
size = "E * T"

[[scratch]]
name = "wgt"
dtype = "fp32"
size = "E * T"

[[scratch]]
name = "slot_pos"
dtype = "int32"
size = "T * K"

[[scratch]]
name = "cnt"
dtype = "int32"
size = "E"

[[scratch]]
name = "off"
dtype = "int32"
size = "E + 1"

[[scratch]]
name = "tiles"
dtype = "int32"
size = "2 * (ceil(T * min(K, E) / 128) + E) + 1"

[[scratch]]
name = "z_hi"
dtype = "bf16"
size = "T * min(K, E) * I"

[[scratch]]
name = "z_lo"
dtype = "bf16"
size = "T * min(K, E) * I"

[[scratch]]
name = "y"
dtype = "fp32"
size = "T * min(K, E) * H"

[tune]
COMBINE_THREADS = [256, 128, 512]
MINB = [1, 2]

[defines]
COMBINE_THREADS = 256
MINB = 1
*/
// Baseline fused MoE: routing in a first launch, then a real grouped GEMM on tensor cores.
// 1. route: block per expert, ordered compaction of the tokens routed to it (duplicate slots
//    of a row merged: one pair, weights added); 2. schedule: per-expert offsets and the list
//    of 128-row tiles (expert, first row); 3. gemm1: gathered rows of x × W1[e]ᵀ with
//    mma.sync m16n8k16 bf16 → fp32 (exact bf16 products), 128×128 tiles whose columns pair
//    64 gate rows with the matching 64 up rows, so the epilogue computes z = silu(g)·u in
//    registers; z is stored as a two-term bf16 split (hi + lo, relative residual ≤ 2⁻¹⁸) so
//    that 4. gemm2 (y = W2[e]·z, K' = 2I: hi then lo) keeps fp32-level accuracy on tensor
//    cores; 5. combine: out[t] = Σ over the row's distinct experts (increasing id) of ω·y.
// Global → shared through cp.async (16 B, zero-fill past the end), two stages; fragments
// through ldmatrix.x4 from padded rows (conflict-free).
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define BK 32
#define LDS 40  // padded row length of the shared tiles (bf16)

__device__ __forceinline__ int block_excl_scan(bool flag, int* warp_tot, int* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const unsigned b = __ballot_sync(0xffffffffu, flag);
    const int pre = __popc(b & ((1u << lane) - 1u));
    if (lane == 0) warp_tot[warp] = __popc(b);
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int w = 0; w < nw; ++w) { const int c = warp_tot[w]; warp_tot[w] = s; s += c; }
        *total = s;
    }
    __syncthreads();
    return warp_tot[warp] + pre;
}

extern "C" __global__ void moe_route(const int* __restrict__ ids, const float* __restrict__ w,
                                     int* tok, float* wgt, int* slot_pos, int* cnt, int T, int K) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    int base = 0;
    for (int t0 = 0; t0 < T; t0 += blockDim.x) {
        const int t = t0 + threadIdx.x;
        int first = -1;
        float om = 0.0f;
        if (t < T) {
            for (int k = 0; k < K; ++k) {
                if (ids[(long long)t * K + k] == e) {
                    if (first < 0) { first = k; om = w[(long long)t * K + k]; }
                    else { om += w[(long long)t * K + k]; slot_pos[(long long)t * K + k] = -1; }
                }
            }
        }
        const int r = block_excl_scan(first >= 0, warp_tot, &total);
        if (first >= 0) {
            tok[(long long)e * T + base + r] = t;
            wgt[(long long)e * T + base + r] = om;
            slot_pos[(long long)t * K + first] = base + r;
        }
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) cnt[e] = base;
}

// tiles[0] = number of tiles; tiles[1 + 2i] = expert, tiles[2 + 2i] = first row.
extern "C" __global__ void moe_schedule(const int* cnt, int* off, int* tiles, int E) {
    if (threadIdx.x != 0) return;
    int s = 0, n = 0;
    for (int e = 0; e < E; ++e) {
        off[e] = s;
        for (int m0 = 0; m0 < cnt[e]; m0 += BM) { tiles[1 + 2 * n] = e; tiles[2 + 2 * n] = m0; ++n; }
        s += cnt[e];
    }
    off[E] = s;
    tiles[0] = n;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}

__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One BK-slice of the warp's 64×32 tile: 2 k16 steps, 4×4 mma each.
__device__ __forceinline__ void warp_mma_slice(const __nv_bfloat16* As, const __nv_bfloat16* Bs, int wm, int wn, int lane,
                                               float (&acc)[4][4][4]) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
            const __nv_bfloat16* p = As + (wm * 64 + mi * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8;
            ldsm_x4(a[mi][0], a[mi][1], a[mi][2], a[mi][3], p);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            const __nv_bfloat16* p = Bs + (wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + ks * 16 + ((lane >> 3) & 1) * 8;
            ldsm_x4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1], p);
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) mma_bf16(acc[mi][nj], a[mi], b[nj]);
    }
}

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }

extern "C" __global__ void __launch_bounds__(256, MINB) moe_gemm1(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w1, const int* __restrict__ tok,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles,
    __nv_bfloat16* __restrict__ z_hi, __nv_bfloat16* __restrict__ z_lo, int T, int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int rows = cnt[e];
    const int j0 = blockIdx.x * 64;
    __shared__ __align__(16) __nv_bfloat16 As[2][BM * LDS];
    __shared__ __align__(16) __nv_bfloat16 Bs[2][BN * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
    // Loader: chunks tid and tid + 256 of each tile (row = c / 4, 8-element chunk = c % 4).
    const int lrow = tid >> 2, lch = (tid & 3) * 8;
    const __nv_bfloat16* ag[2];
    bool av[2];
    const __nv_bfloat16* bg[2];
    bool bv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = lrow + 64 * h;
        av[h] = m0 + r < rows;
        ag[h] = x + (av[h] ? (long long)tok[(long long)e * T + m0 + r] * H : 0) + lch;
        // B row r: warp group r / 32, gate (q < 16) or up (q ≥ 16) of z column j0 + 16·(r/32) + q % 16.
        const int q = r & 31, zc = j0 + (r >> 5) * 16 + (q & 15);
        bv[h] = zc < I;
        bg[h] = w1 + (bv[h] ? ((long long)e * 2 * I + (q >= 16 ? I : 0) + zc) * H : 0) + lch;
    }
    float acc[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
    const int nk = H / BK;
    auto load = [&](int st, int kt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            cp_async16(&As[st][(lrow + 64 * h) * LDS + lch], ag[h] + kt * BK, av[h]);
            cp_async16(&Bs[st][(lrow + 64 * h) * LDS + lch], bg[h] + kt * BK, bv[h]);
        }
        cp_commit();
    };
    load(0, 0);
    for (int kt = 0; kt < nk; ++kt) {
        if (kt + 1 < nk) { load((kt + 1) & 1, kt + 1); cp_wait<1>(); } else { cp_wait<0>(); }
        __syncthreads();
        warp_mma_slice(As[kt & 1], Bs[kt & 1], wm, wn, lane, acc);
        __syncthreads();
    }
    // Epilogue: nj 0,1 gate and nj 2,3 up of the same z columns.
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int m = m0 + wm * 64 + mi * 16 + (lane >> 2) + hr * 8;
            if (m >= rows) continue;
            const long long p = (long long)off[e] + m;
#pragma unroll
            for (int nj = 0; nj < 2; ++nj) {
                const int zc = j0 + wn * 16 + nj * 8 + (lane & 3) * 2;
                if (zc >= I) continue;
                float zz[2];
#pragma unroll
                for (int c = 0; c < 2; ++c) zz[c] = silu_f(acc[mi][nj][hr * 2 + c]) * acc[mi][nj + 2][hr * 2 + c];
                const __nv_bfloat162 hi = __floats2bfloat162_rn(zz[0], zz[1]);
                const float2 hf = __bfloat1622float2(hi);
                const __nv_bfloat162 lo = __floats2bfloat162_rn(zz[0] - hf.x, zz[1] - hf.y);
                *reinterpret_cast<__nv_bfloat162*>(z_hi + p * I + zc) = hi;
                *reinterpret_cast<__nv_bfloat162*>(z_lo + p * I + zc) = lo;
            }
        }
}

extern "C" __global__ void __launch_bounds__(256, MINB) moe_gemm2(
    const __nv_bfloat16* __restrict__ z_hi, const __nv_bfloat16* __restrict__ z_lo, const __nv_bfloat16* __restrict__ w2,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles, float* __restrict__ y,
    int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int rows = cnt[e];
    const int n0 = blockIdx.x * BN;
    const long long pbase = off[e];
    __shared__ __align__(16) __nv_bfloat16 As[2][BM * LDS];
    __shared__ __align__(16) __nv_bfloat16 Bs[2][BN * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
    const int lrow = tid >> 2, lch = (tid & 3) * 8;
    long long aoff[2];
    bool av[2];
    const __nv_bfloat16* bg[2];
    bool bv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = lrow + 64 * h;
        av[h] = m0 + r < rows;
        aoff[h] = (av[h] ? (pbase + m0 + r) * I : 0) + lch;
        bv[h] = n0 + r < H;
        bg[h] = w2 + (bv[h] ? ((long long)e * H + n0 + r) * I : 0) + lch;
    }
    float acc[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
    const int nki = I / BK, nk = 2 * nki;  // hi part, then lo part
    auto load = [&](int st, int kt) {
        const __nv_bfloat16* za = kt < nki ? z_hi : z_lo;
        const int kk = (kt < nki ? kt : kt - nki) * BK;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            cp_async16(&As[st][(lrow + 64 * h) * LDS + lch], za + aoff[h] + kk, av[h]);
            cp_async16(&Bs[st][(lrow + 64 * h) * LDS + lch], bg[h] + kk, bv[h]);
        }
        cp_commit();
    };
    load(0, 0);
    for (int kt = 0; kt < nk; ++kt) {
        if (kt + 1 < nk) { load((kt + 1) & 1, kt + 1); cp_wait<1>(); } else { cp_wait<0>(); }
        __syncthreads();
        warp_mma_slice(As[kt & 1], Bs[kt & 1], wm, wn, lane, acc);
        __syncthreads();
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int m = m0 + wm * 64 + mi * 16 + (lane >> 2) + hr * 8;
            if (m >= rows) continue;
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                const int d = n0 + wn * 32 + nj * 8 + (lane & 3) * 2;
                if (d >= H) continue;
                *reinterpret_cast<float2*>(y + (pbase + m) * H + d) = make_float2(acc[mi][nj][hr * 2], acc[mi][nj][hr * 2 + 1]);
            }
        }
}

// One thread per 4 consecutive outputs of a row (H % 4 == 0).
extern "C" __global__ void moe_combine(float* __restrict__ out, const float* __restrict__ y, const int* __restrict__ ids,
                                       const float* __restrict__ wgt, const int* __restrict__ slot_pos,
                                       const int* __restrict__ off, int T, int H, int K) {
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int h4 = H / 4;
    if (idx >= (long long)T * h4) return;
    const int t = (int)(idx / h4), d = (int)(idx % h4) * 4;
    int ex[16];
    long long pp[16];
    float om[16];
    int c = 0;
    for (int k = 0; k < K && k < 16; ++k) {
        const int pos = slot_pos[(long long)t * K + k];
        if (pos < 0) continue;
        const int e = ids[(long long)t * K + k];
        int j = c++;
        while (j > 0 && ex[j - 1] > e) { ex[j] = ex[j - 1]; pp[j] = pp[j - 1]; om[j] = om[j - 1]; --j; }
        ex[j] = e;
        pp[j] = (long long)off[e] + pos;
        om[j] = wgt[(long long)e * T + pos];
    }
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int j = 0; j < c; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(y + pp[j] * H + d);
        acc.x += om[j] * v.x; acc.y += om[j] * v.y; acc.z += om[j] * v.z; acc.w += om[j] * v.w;
    }
    *reinterpret_cast<float4*>(out + (long long)t * H + d) = acc;
}
