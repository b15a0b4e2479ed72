/* atrex:plan
[[launch]]
kernel = "fp8moe_route"
grid = ["E"]
block = [1024]
args = ["topk_ids", "tok", "slot_pos", "cnt", "T*K:i32"]

[[launch]]
kernel = "fp8moe_schedule"
grid = [1]
block = [32]
args = ["cnt", "off", "tiles", "E:i32"]

[[launch]]
kernel = "fp8moe_gemm1"
grid = ["ceil(I / 64)", "ceil(T * K / 128) + E"]
block = [256]
args = ["hidden_states", "a_scale", "w1", "fc1_scale", "tok", "cnt", "off", "tiles", "z", "T*K:i32", "K:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_gemm2"
grid = ["ceil(H / 128)", "ceil(T * K / 128) + E"]
block = [256]
args = ["z", "w2", "fc2_scale", "cnt", "off", "tiles", "y", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_combine"
grid = ["ceil(T * H / 4 / COMBINE_THREADS)"]
block = ["COMBINE_THREADS"]
args = ["out", "y", "topk_ids", "topk_weights", "slot_pos", "off", "T:i32", "H:i32", "K:i32"]

[[scratch]]
name = "tok"
dtype = "int32"
size = "E * T * K"

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
size = "2 * (ceil(T * K / 128) + E) + 1"

[[scratch]]
name = "z"
dtype = "fp32"
size = "T * K * I"

[[scratch]]
name = "y"
dtype = "fp32"
size = "T * K * H"

[tune]
COMBINE_THREADS = [256, 128, 512]
MINB = [1, 2]

[defines]
COMBINE_THREADS = 256
MINB = 1
*/
// Baseline FP8 (e4m3fnuz) block-scaled fused MoE. The output is compared code for code, so
// this kernel keeps the reference's exact fp32 arithmetic: every dot product is one fp32 FMA
// chain in increasing reduction index over the dequantized operands (code·scale, one fp32
// multiply) — tensor cores (fp8 or bf16 mma) reorder and truncate the accumulation and would
// flip about one code in a million. Within that constraint it is a real grouped GEMM:
// 1. route: block per expert, its slots in increasing flat index; 2. schedule: offsets and
// the list of 128-row tiles; 3. gemm1: gathered activation rows × W1[e]ᵀ, 128×128 tiles
// (64 gate + 64 up columns), 8×8 outputs per thread read as float4 from shared memory,
// 16-byte fp8 loads dequantized in the loader, next tile prefetched into registers; SiLU·up
// in the epilogue; 4. gemm2: z × W2[e]ᵀ, same scheme; 5. combine: acc = Σ_k w·y in slot
// order, software fnuz cast without clamping (|acc| ≥ 248 → NaN 0x80), 4 outputs per thread.
#include <cuda_fp8.h>

#define BM 128
#define BN 128
#define BK 32
#define LDS (BM + 4)

__device__ __forceinline__ float fnuz_to_f(unsigned c) {
    c &= 0xffu;
    if (c == 0x80) return __int_as_float(0x7fc00000);
    const int e = (c >> 3) & 15, m = c & 7;
    const float v = e == 0 ? (float)m * 0.0009765625f : (float)(8 + m) * __uint_as_float((unsigned)(e - 11 + 127) << 23);
    return (c & 0x80) ? -v : v;
}

__device__ __forceinline__ unsigned f_to_fnuz(float x) {
    const float a = fabsf(x);
    if (!(a < 248.0f)) return 0x80;
    const unsigned s = (x < 0.0f) ? 0x80u : 0u;
    if (a < 0.0078125f) {
        const int m = (int)rintf(a * 1024.0f);
        if (m == 0) return 0;
        return s | (unsigned)m;
    }
    int e = (int)((__float_as_uint(a) >> 23) & 0xff) - 127;
    const float r = a * __uint_as_float((unsigned)(127 - e) << 23);
    int m = (int)rintf((r - 1.0f) * 8.0f);
    if (m == 8) { m = 0; ++e; }
    return s | ((unsigned)(e + 8) << 3) | (unsigned)m;
}

__device__ __forceinline__ float silu_f(float g) {
    const float e = (float)exp(-(double)g);
    return __fdiv_rn(g, __fadd_rn(1.0f, e));
}

extern "C" __global__ void fp8moe_route(const int* __restrict__ ids, int* tok, int* slot_pos, int* cnt, int N) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int base = 0;
    for (int f0 = 0; f0 < N; f0 += blockDim.x) {
        const int f = f0 + threadIdx.x;
        const bool hit = f < N && ids[f] == e;
        const unsigned b = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) warp_tot[warp] = __popc(b);
        __syncthreads();
        if (threadIdx.x == 0) {
            int s = 0;
            for (int w = 0; w < nw; ++w) { const int c = warp_tot[w]; warp_tot[w] = s; s += c; }
            total = s;
        }
        __syncthreads();
        if (hit) {
            const int r = base + warp_tot[warp] + __popc(b & ((1u << lane) - 1u));
            tok[(long long)e * N + r] = f;
            slot_pos[f] = r;
        }
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) cnt[e] = base;
}

extern "C" __global__ void fp8moe_schedule(const int* cnt, int* off, int* tiles, int E) {
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

// 8×8 micro-tile: rows ty·4 + i and 64 + ty·4 + i, columns tx·4 + j and 64 + tx·4 + j.
__device__ __forceinline__ void micro_step(const float (*As)[LDS], const float (*Bs)[LDS], int tx, int ty,
                                           float (&acc)[8][8]) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][64 + tx * 4]);
        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
}

__device__ __forceinline__ int micro_row(int ty, int i) { return i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4); }

// 16 fp8 codes (one uint4) dequantized with one scale.
__device__ __forceinline__ void deq16(uint4 v, float s, float* o) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[q * 4 + c] = __fmul_rn(fnuz_to_f(w[q] >> (8 * c)), s);
}

extern "C" __global__ void __launch_bounds__(256, MINB) fp8moe_gemm1(
    const unsigned char* __restrict__ x, const float* __restrict__ a_scale, const unsigned char* __restrict__ w1,
    const float* __restrict__ fc1_scale, const int* __restrict__ tok, const int* __restrict__ cnt,
    const int* __restrict__ off, const int* __restrict__ tiles, float* __restrict__ z, int N, int K, int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int rows = cnt[e];
    const int j0 = blockIdx.x * 64;
    const int nbh = H / 128, nbi2 = 2 * I / 128;
    __shared__ __align__(16) float As[BK][LDS];
    __shared__ __align__(16) float Bs[BK][LDS];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    // Loader: one 16-byte chunk of A and one of B per thread: row tid / 2, k half (tid & 1)·16.
    const int lr = tid >> 1, lk = (tid & 1) * 16;
    const bool av = m0 + lr < rows;
    const int t = av ? tok[(long long)e * N + m0 + lr] / K : 0;
    const unsigned char* ag = x + (long long)t * H + lk;
    const float* as = a_scale + (long long)t * nbh;
    const int zc = j0 + (lr & 63);
    const bool bv = zc < I;
    const int bn = (lr < 64 ? 0 : I) + zc;
    const unsigned char* bgp = w1 + (bv ? ((long long)e * 2 * I + bn) * H : 0) + lk;
    const float* bs = fc1_scale + ((long long)e * nbi2 + (bv ? bn : 0) / 128) * nbh;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    uint4 ra = make_uint4(0, 0, 0, 0), rb = make_uint4(0, 0, 0, 0);
    if (av) ra = *reinterpret_cast<const uint4*>(ag);
    if (bv) rb = *reinterpret_cast<const uint4*>(bgp);
    for (int k0 = 0; k0 < H; k0 += BK) {
        float va[16], vb[16];
        deq16(ra, av ? as[k0 / 128] : 0.0f, va);
        deq16(rb, bv ? bs[k0 / 128] : 0.0f, vb);
#pragma unroll
        for (int q = 0; q < 16; ++q) { As[lk + q][lr] = va[q]; Bs[lk + q][lr] = vb[q]; }
        __syncthreads();
        if (k0 + BK < H) {
            if (av) ra = *reinterpret_cast<const uint4*>(ag + k0 + BK);
            if (bv) rb = *reinterpret_cast<const uint4*>(bgp + k0 + BK);
        }
        micro_step(As, Bs, tx, ty, acc);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + micro_row(ty, i);
        if (m >= rows) continue;
        const long long p = off[e] + m;
        const int col = j0 + tx * 4;
        if (col >= I) continue;
        float4 o;
        o.x = __fmul_rn(silu_f(acc[i][0]), acc[i][4]);
        o.y = __fmul_rn(silu_f(acc[i][1]), acc[i][5]);
        o.z = __fmul_rn(silu_f(acc[i][2]), acc[i][6]);
        o.w = __fmul_rn(silu_f(acc[i][3]), acc[i][7]);
        *reinterpret_cast<float4*>(z + p * I + col) = o;
    }
}

extern "C" __global__ void __launch_bounds__(256, MINB) fp8moe_gemm2(
    const float* __restrict__ z, const unsigned char* __restrict__ w2, const float* __restrict__ fc2_scale,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles, float* __restrict__ y,
    int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int rows = cnt[e];
    const int n0 = blockIdx.x * BN;
    const int nbi = I / 128, nbh = H / 128;
    const long long pbase = off[e];
    __shared__ __align__(16) float As[BK][LDS];
    __shared__ __align__(16) float Bs[BK][LDS];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int lr = tid >> 1, lk = (tid & 1) * 16;
    const bool av = m0 + lr < rows;
    const float* ag = z + (av ? (pbase + m0 + lr) * I : 0) + lk;
    const bool bv = n0 + lr < H;
    const unsigned char* bgp = w2 + (bv ? ((long long)e * H + n0 + lr) * I : 0) + lk;
    const float* bs = fc2_scale + ((long long)e * nbh + (bv ? n0 + lr : 0) / 128) * nbi;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    float4 ra[4];
    uint4 rb = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int q = 0; q < 4; ++q) ra[q] = av ? reinterpret_cast<const float4*>(ag)[q] : make_float4(0.f, 0.f, 0.f, 0.f);
    if (bv) rb = *reinterpret_cast<const uint4*>(bgp);
    for (int k0 = 0; k0 < I; k0 += BK) {
        float vb[16];
        deq16(rb, bv ? bs[k0 / 128] : 0.0f, vb);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            As[lk + 4 * q + 0][lr] = ra[q].x;
            As[lk + 4 * q + 1][lr] = ra[q].y;
            As[lk + 4 * q + 2][lr] = ra[q].z;
            As[lk + 4 * q + 3][lr] = ra[q].w;
        }
#pragma unroll
        for (int q = 0; q < 16; ++q) Bs[lk + q][lr] = vb[q];
        __syncthreads();
        if (k0 + BK < I) {
#pragma unroll
            for (int q = 0; q < 4; ++q) if (av) ra[q] = reinterpret_cast<const float4*>(ag + k0 + BK)[q];
            if (bv) rb = *reinterpret_cast<const uint4*>(bgp + k0 + BK);
        }
        micro_step(As, Bs, tx, ty, acc);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + micro_row(ty, i);
        if (m >= rows) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int d = n0 + h * 64 + tx * 4;
            if (d >= H) continue;
            *reinterpret_cast<float4*>(y + (pbase + m) * H + d) =
                make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
        }
    }
}

// One thread per 4 consecutive outputs (H % 4 == 0): acc = Σ_k w·y in slot order; fnuz cast.
extern "C" __global__ void fp8moe_combine(unsigned char* __restrict__ out, const float* __restrict__ y,
                                          const int* __restrict__ ids, const float* __restrict__ w,
                                          const int* __restrict__ slot_pos, const int* __restrict__ off,
                                          int T, int H, int K) {
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int h4 = H / 4;
    if (idx >= (long long)T * h4) return;
    const long long t = idx / h4;
    const int d = (int)(idx % h4) * 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < K; ++k) {
        const long long f = t * K + k;
        const long long p = (long long)off[ids[f]] + slot_pos[f];
        const float wk = w[f];
        const float4 v = *reinterpret_cast<const float4*>(y + p * H + d);
        const float4 q = make_float4(__fmul_rn(wk, v.x), __fmul_rn(wk, v.y), __fmul_rn(wk, v.z), __fmul_rn(wk, v.w));
        if (k == 0) acc = q;
        else acc = make_float4(__fadd_rn(acc.x, q.x), __fadd_rn(acc.y, q.y), __fadd_rn(acc.z, q.z), __fadd_rn(acc.w, q.w));
    }
    const unsigned o = f_to_fnuz(acc.x) | (f_to_fnuz(acc.y) << 8) | (f_to_fnuz(acc.z) << 16) | (f_to_fnuz(acc.w) << 24);
    *reinterpret_cast<unsigned*>(out + t * H + d) = o;
}
