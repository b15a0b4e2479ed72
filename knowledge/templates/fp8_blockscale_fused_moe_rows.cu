/* atrex:template
id = "tpl-fp8-blockscale-fused-moe-rows"
title = "Bit-exact fp8 (e4m3fnuz) block-scaled fused MoE: 128x128 CUDA-core tiles plus a weight-streaming path for tiles of few rows (decode)"
operator = "fp8_blockscale_fused_moe"
architectures = ["hopper", "ampere", "blackwell"]
families = ["gemm", "moe", "quantization"]
bottlenecks = ["memory", "balanced"]
category = "algorithm"
expected_gain = "decode shapes (one to a few rows per expert) stream each weight once instead of computing 128-row tiles; the schedule is a block scan instead of one thread looping over the experts"
pitfalls = ["the output is compared code for code: keep the reference's fp32 FMA chain in increasing k for every dot product, no tensor cores, no split-K", "fnuz codes read as f16 bits (s, 0e, m) are exactly value / 128: widen through f16 and multiply by 128 * scale (one rounding, as code * scale)", "size grids over tiles by ceil(T*K/128) + min(E, T*K): every empty block still costs a launch slot", "a one-thread loop over the experts in the schedule costs a dependent global round trip per expert (tens of microseconds)"]
[measured]
s_op = 0.1839
baseline_s_op = 0.0224
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.184, every shape passing at the strict level (docs/measurements/bench-best-fp8_blockscale_fused_moe.json).
/* atrex:plan
[[launch]]
kernel = "fp8moe_route"   # the last block to finish also schedules (one launch for both)
grid = ["E"]
block = [1024]
args = ["topk_ids", "tok", "slot_pos", "cnt", "T*K:i32", "off", "tiles", "E:i32", "routed"]

[[launch]]
kernel = "fp8moe_gemm1"
when = "T * K > SMALL"   # a tile of more than SMALL rows needs more slots than that
grid = ["ceil(I / 64)", "ceil(T * K / 128) + min(E, T * K)"]
block = [256]
args = ["hidden_states", "a_scale", "w1", "fc1_scale", "tok", "cnt", "off", "tiles", "z", "T*K:i32", "K:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_rows1"
grid = ["ceil(I / 64)", "ceil(T * K / 128) + min(E, T * K)"]
block = [128]
smem = "STAGES * 128 * 144"
args = ["hidden_states", "a_scale", "w1", "fc1_scale", "tok", "cnt", "off", "tiles", "z", "T*K:i32", "K:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_gemm2"
when = "T * K > SMALL"
grid = ["ceil(H / 128)", "ceil(T * K / 128) + min(E, T * K)"]
block = [256]
args = ["z", "w2", "fc2_scale", "cnt", "off", "tiles", "y", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_rows2"
grid = ["ceil(H / 128)", "ceil(T * K / 128) + min(E, T * K)"]
block = [128]
smem = "STAGES * 128 * 144"
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
name = "routed"   # blocks of fp8moe_route done
dtype = "int32"
size = "1"
zero = true

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
SMALL = [32, 16]
STAGES = [4, 3, 6]

[defines]
SMALL = 32
STAGES = 4
COMBINE_THREADS = 256
MINB = 1
*/
// FP8 (e4m3fnuz) block-scaled fused MoE, bit-identical to the reference. The output is
// compared code for code, so every dot product is the reference's fp32 FMA chain in increasing
// reduction index over the dequantized operands (code·scale, one fp32 multiply): tensor cores
// reorder and truncate the accumulation and would flip about one code in a million.
// 1. route: block per expert, its slots in increasing flat index; 2. schedule, by the last
// route block to finish (an arrival counter in zeroed scratch; one launch for both): a block
// scan of the experts' row and tile counts (offsets and the list of 128-row tiles); 3. gemm1 and
// 4. gemm2: the baseline's 128×128 CUDA-core tiles, only for tiles of more than SMALL rows;
// 3b. rows1 and 4b. rows2: tiles of at most SMALL rows stream the weights once (see below);
// 5. combine: acc = Σ_k w·y in slot order, software fnuz cast without clamping.
//
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 6/6 shapes bit-identical on 5 seeds):
// S_op 0.183 against the baseline's 0.022 (docs/measurements/bench-best-fp8_blockscale_fused_moe.json;
// 0.166 before the schedule moved into the route launch: shape 4 103 → 99.2 µs, S 0.306 → 0.317,
// shape 2 0.432 → 0.439, S_op 0.172; then the tile GEMMs skipped where no tile can exceed SMALL
// rows (`when = "T * K > SMALL"`: the decode shapes launch neither): shape 4 → 92.6 µs (0.340),
// shape 2 0.459, S_op 0.183; the combine issuing its slots' loads before the ordered sum
// measured equal, quick: 102.3 against 102.0 µs;
// the benchmark-compatible S_op stays 0: the reference itself holds NaN on four shapes). The
// decode shapes went from S 0.026 / 0.027 / 0.022 to 0.432 (shape 2, T = 1), 0.450 (shape 3,
// T = 32) and 0.306 (shape 4, T = 1) — 2026-12-01: a single-row tile's A loaded whole into
// shared memory first (2026-11-30: 0.405 / 0.413 / 0.286); on the way (quick), sizing the grids by the tiles that can
// exist (0.307 → 0.357 on shape 2) and the scanned schedule (→ 0.402) mattered
// as much as the weight streaming. Shapes 0, 1 and 5 stay CUDA-core bound (fp32 FMA: at most
// about 67 / 1979 = 0.034 of the fp8 peak that T_SOL counts), so S_op, the mean of the middle
// two of six, is (shape 1 + shape 4) / 2. Profile (shape 4): rows1 55 µs and rows2 25 µs at
// 39-44 % of DRAM bandwidth, few stalls — one dependent FMA chain per output and about six
// instructions per weight code (widen, convert, dequantize, FMA) bound them: 24 576 rows are
// 768 warps, under six per SM at IPC 0.25 each. The launches around them (route, schedule, the
// two empty tile GEMMs, combine) cost 18 µs of shape 4's 103. Loading the block scales two
// stages ahead changed nothing (quick). Profile again (2026-12-01, shape 4): rows1 56 µs, 216
// blocks of 128 threads (192 with rows) on 132 SMs, 2 fit per SM (168 registers, 115 KB of shared
// memory) but the grid gives 1.5: 6 warps per SM, warp CPI ≈ 3 with no dominant stall — the
// parallelism is the number of outputs (one serial chain each), not the occupancy, so STAGES and
// SMALL cannot add warps. Measured and not kept (quick, shapes 2 3 4; this kernel 103 / 102 µs on
// shape 4 in two runs): the one-row stage fully unrolled 105.6 µs (with one barrier per stage
// instead of two) and 109 µs (two barriers); one barrier per stage alone 102.8 µs (equal).
// Profile (2026-12-01, shape 4, `profile --source`): rows1 54.7 µs, 21.4 M warp instructions
// (6.8 per weight code: LOP3 16 %, FMUL 15 %, FFMA 15 %, HADD2 15 %, SHF 10 %, PRMT 7 %),
// stall samples: issuing 31 %, long_scoreboard 24 % (11 % at the FMUL of the stage's block
// scale), fixed-latency waits 13 %, instruction fetch 12 %. The scales staged in shared memory
// instead (512 bytes more per block): 2 blocks of 115.7 KB no longer fit an SM, shape 4
// 102 → 112 µs, shape 3 3.46 → 4.16 ms (quick; not kept). The small launches around the two
// streaming kernels (route 2.8, schedule 2.7, the two tile GEMMs without tiles 3.5 each,
// combine 6.5 µs under the profiler) were 19 of shape 4's 103 µs.
#include <cuda_fp8.h>
#include <cuda_fp16.h>

#ifndef SMALL
#define SMALL 32
#endif
#ifndef STAGES
#define STAGES 4
#endif

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

__device__ void schedule_body(const int* cnt, int* __restrict__ off, int* __restrict__ tiles, int E);

extern "C" __global__ void fp8moe_route(const int* __restrict__ ids, int* tok, int* slot_pos, int* cnt, int N,
                                        int* __restrict__ off, int* __restrict__ tiles, int E, int* routed) {
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
    // The last block to count its expert schedules all of them (release: the count, a fence,
    // the arrival; acquire: the arrival seen, a fence, the counts read past L1).
    __shared__ bool last;
    if (threadIdx.x == 0) {
        cnt[e] = base;
        __threadfence();
        last = atomicAdd(routed, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    schedule_body(cnt, off, tiles, E);
}

// tiles[0] = number of tiles; tiles[1 + 2i] = expert, tiles[2 + 2i] = first row. One block:
// each thread takes one expert of a chunk of blockDim.x, scans (row count, tile count) across
// the block and writes its expert's offset and tiles (a serial loop over E costs one dependent
// global round trip per expert: tens of microseconds at E = 128-256).
__device__ __forceinline__ int2 warp_incl_scan2(int2 v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int a = __shfl_up_sync(0xffffffffu, v.x, d), b = __shfl_up_sync(0xffffffffu, v.y, d);
        if (lane >= d) { v.x += a; v.y += b; }
    }
    return v;
}

__device__ void schedule_body(const int* cnt, int* __restrict__ off, int* __restrict__ tiles, int E) {
    __shared__ int2 wsum[32];
    __shared__ int2 carry;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (threadIdx.x == 0) carry = make_int2(0, 0);
    __syncthreads();
    for (int e0 = 0; e0 < E; e0 += blockDim.x) {
        const int e = e0 + threadIdx.x;
        const int c = e < E ? __ldcg(cnt + e) : 0;
        const int2 own = make_int2(c, (c + BM - 1) / BM);
        const int2 inc = warp_incl_scan2(own);
        if (lane == 31) wsum[warp] = inc;
        __syncthreads();
        if (warp == 0) {
            int2 w = lane < nw ? wsum[lane] : make_int2(0, 0);
            const int2 wi = warp_incl_scan2(w);
            if (lane < nw) wsum[lane] = make_int2(wi.x - w.x, wi.y - w.y);  // exclusive
        }
        __syncthreads();
        const int2 base = carry;
        const int rows0 = base.x + wsum[warp].x + inc.x - own.x;
        const int tile0 = base.y + wsum[warp].y + inc.y - own.y;
        if (e < E) {
            off[e] = rows0;
            for (int i = 0; i < own.y; ++i) {
                tiles[1 + 2 * (tile0 + i)] = e;
                tiles[2 + 2 * (tile0 + i)] = i * BM;
            }
        }
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry = make_int2(rows0 + own.x, tile0 + own.y);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        off[E] = carry.x;
        tiles[0] = carry.y;
    }
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
    if (rows - m0 <= SMALL) return;  // fp8moe_rows1/2 take tiles of few rows
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
    if (rows - m0 <= SMALL) return;  // fp8moe_rows1/2 take tiles of few rows
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

// ---- Tiles of at most SMALL rows (decode: one token meets 8 experts once each) ----
// The 128×128 tiles above compute all 128 rows whatever the expert holds; for a tile of r ≤
// SMALL rows this path streams the weights once (cp.async, STAGES stages of 128 rows × 128
// codes) and computes only R ≥ r rows: one thread per weight row, R accumulators, each output
// the same fp32 FMA chain in increasing k as the reference (so the codes stay bit-identical).
// Weight codes are widened through f16: fnuz bits (s, e, m) placed as f16 bits (s, 0e, m)
// give exactly value / 128 (normal and subnormal alike), so float(code) · scale is
// f16(code) · (128 · scale) with one rounding. Code 0x80 (fnuz NaN) would read as −0: the
// weights are quantized with a clamp and never hold it.
#define WROW 144  // bytes per staged weight row (128 codes + 16 of padding: conflict-free 16-byte reads)

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Four fnuz codes → their values / 128, exactly.
__device__ __forceinline__ void widen4(unsigned w, float (&v)[4]) {
    const unsigned lo = __byte_perm(w, 0, 0x4140), hi = __byte_perm(w, 0, 0x4342);
    const unsigned hl = ((lo << 7) & 0x3f803f80u) | ((lo << 8) & 0x80008000u);
    const unsigned hh = ((hi << 7) & 0x3f803f80u) | ((hi << 8) & 0x80008000u);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&hl));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hh));
    v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}

// Stages the 128 weight rows `row(n)` × codes [k0, k0 + 128) into ws (128 threads, 8 × 16 B each).
template <typename RowPtr>
__device__ __forceinline__ void stage_w(unsigned char* ws, RowPtr row, int k0) {
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const int n = threadIdx.x / 8 + 16 * q, c = threadIdx.x % 8;
        cp_async16(ws + n * WROW + c * 16, row(n) + k0 + c * 16);
    }
}

// acc[m] = chain over this stage's 128 k of fma(a[m][k], w[k], acc[m]); w[k] = f16(code)·s128.
template <int R>
__device__ __forceinline__ void chain_stage(const unsigned char* wrow, const float (*as)[128], float s128, float (&acc)[R]) {
#pragma unroll 2
    for (int kk = 0; kk < 128; kk += 16) {
        const uint4 c = *reinterpret_cast<const uint4*>(wrow + kk);
        const unsigned cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            float v[4];
            widen4(cw[q], v);
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = __fmul_rn(v[j], s128);
#pragma unroll
            for (int m = 0; m < R; ++m) {
                const float4 a = *reinterpret_cast<const float4*>(&as[m][kk + 4 * q]);
                acc[m] = __fmaf_rn(a.x, v[0], acc[m]);
                acc[m] = __fmaf_rn(a.y, v[1], acc[m]);
                acc[m] = __fmaf_rn(a.z, v[2], acc[m]);
                acc[m] = __fmaf_rn(a.w, v[3], acc[m]);
            }
        }
    }
}

// The whole reduction for R rows: weights through STAGES cp.async stages, the A operand's
// 128-wide slice for stage it produced by load_a(it, m) (one value per thread and row:
// k = k0 + threadIdx.x) into a double buffer.
template <int R, typename RowPtr, typename LoadA, typename Scale>
__device__ __forceinline__ void rows_gemm(unsigned char* ws, float (*as)[R][128], RowPtr row, LoadA load_a,
                                          Scale scale, int nk, int r, float (&acc)[R]) {
#pragma unroll
    for (int m = 0; m < R; ++m) acc[m] = 0.0f;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nk) stage_w(ws + s * 128 * WROW, row, s * 128);
        cp_commit();
    }
    if constexpr (R == 1) if (nk <= 2 * SMALL) {  // fits the A double buffer (H, I ≤ 256 · SMALL)
        // One row of A (a decode token): all of it into shared memory up front — one memory
        // trip — so that each stage waits only for its weights, not also for a load of A's
        // next 128 values (measured, quick: the decode shapes 2 and 4 5 % faster, shape 3 12 %).
        float* af = &as[0][0][0];
        for (int it = 0; it < nk; ++it) af[it * 128 + threadIdx.x] = load_a(it, 0);
        for (int it = 0; it < nk; ++it) {
            const int nx = it + STAGES - 1;
            if (nx < nk) stage_w(ws + (nx % STAGES) * 128 * WROW, row, nx * 128);
            cp_commit();
            cp_wait<STAGES - 1>();
            __syncthreads();
            chain_stage<R>(ws + (it % STAGES) * 128 * WROW + threadIdx.x * WROW,
                           reinterpret_cast<const float(*)[128]>(af + it * 128), scale(it), acc);
            __syncthreads();
        }
        return;
    }
#pragma unroll
    for (int m = 0; m < R; ++m) as[0][m][threadIdx.x] = m < r ? load_a(0, m) : 0.0f;
    for (int it = 0; it < nk; ++it) {
        const int nx = it + STAGES - 1;
        if (nx < nk) stage_w(ws + (nx % STAGES) * 128 * WROW, row, nx * 128);
        cp_commit();
        float an[R];
#pragma unroll
        for (int m = 0; m < R; ++m) an[m] = (it + 1 < nk && m < r) ? load_a(it + 1, m) : 0.0f;
        cp_wait<STAGES - 1>();
        __syncthreads();
        chain_stage<R>(ws + (it % STAGES) * 128 * WROW + threadIdx.x * WROW, as[it & 1], scale(it), acc);
#pragma unroll
        for (int m = 0; m < R; ++m) as[(it + 1) & 1][m][threadIdx.x] = an[m];
        __syncthreads();
    }
}

template <int R>
__device__ __forceinline__ void rows1(const unsigned char* __restrict__ x, const float* __restrict__ a_scale,
                                      const unsigned char* __restrict__ w1, const float* __restrict__ fc1_scale,
                                      const int* __restrict__ tok, int e, int m0, int r, long long pbase, float* __restrict__ z,
                                      int N, int K, int H, int I, unsigned char* ws, float* asraw, float* ex) {
    const int j0 = blockIdx.x * 64, nbh = H / 128, nbi2 = 2 * I / 128, n = threadIdx.x;
    float (*as)[R][128] = reinterpret_cast<float (*)[R][128]>(asraw);
    // The rows' tokens (shared: R registers fewer per thread).
    __shared__ int t[SMALL];
    if (n < R) t[n] = n < r ? tok[(long long)e * N + m0 + n] / K : 0;
    __syncthreads();
    // Thread n: W1 row (n < 64 ? gate : up) of z column j0 + n % 64.
    const int bn = (n < 64 ? 0 : I) + j0 + (n & 63);
    const unsigned char* w1e = w1 + (long long)e * 2 * I * H;
    auto row = [&](int rr) { return w1e + (long long)((rr < 64 ? 0 : I) + j0 + (rr & 63)) * H; };
    auto load_a = [&](int it, int m) {
        const int k = it * 128 + n;
        return __fmul_rn(fnuz_to_f(x[(long long)t[m] * H + k]), a_scale[(long long)t[m] * nbh + it]);
    };
    const float* sc = fc1_scale + ((long long)e * nbi2 + bn / 128) * nbh;
    auto scale = [&](int it) { return sc[it] * 128.0f; };
    float acc[R];
    rows_gemm<R>(ws, as, row, load_a, scale, H / 128, r, acc);
    // Up threads hand their sums to the gate threads of the same column.
    if (n >= 64) {
#pragma unroll
        for (int m = 0; m < R; ++m) ex[m * 64 + (n - 64)] = acc[m];
    }
    __syncthreads();
    if (n < 64) {
#pragma unroll
        for (int m = 0; m < R; ++m)
            if (m < r) z[(pbase + m) * I + j0 + n] = __fmul_rn(silu_f(acc[m]), ex[m * 64 + n]);
    }
}

extern "C" __global__ void __launch_bounds__(128) fp8moe_rows1(
    const unsigned char* __restrict__ x, const float* __restrict__ a_scale, const unsigned char* __restrict__ w1,
    const float* __restrict__ fc1_scale, const int* __restrict__ tok, const int* __restrict__ cnt,
    const int* __restrict__ off, const int* __restrict__ tiles, float* __restrict__ z, int N, int K, int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int r = min(cnt[e] - m0, BM);
    if (r > SMALL) return;
    extern __shared__ __align__(16) unsigned char ws[];
    __shared__ __align__(16) float asraw[2 * SMALL * 128];
    __shared__ float ex[SMALL * 64];
    const long long pbase = (long long)off[e] + m0;
    if (r == 1) rows1<1>(x, a_scale, w1, fc1_scale, tok, e, m0, r, pbase, z, N, K, H, I, ws, asraw, ex);
    else if (r <= 4) rows1<4>(x, a_scale, w1, fc1_scale, tok, e, m0, r, pbase, z, N, K, H, I, ws, asraw, ex);
    else if (r <= 16) rows1<16>(x, a_scale, w1, fc1_scale, tok, e, m0, r, pbase, z, N, K, H, I, ws, asraw, ex);
    else rows1<SMALL>(x, a_scale, w1, fc1_scale, tok, e, m0, r, pbase, z, N, K, H, I, ws, asraw, ex);
}

template <int R>
__device__ __forceinline__ void rows2(const float* __restrict__ z, const unsigned char* __restrict__ w2,
                                      const float* __restrict__ fc2_scale, int e, int r, long long pbase,
                                      float* __restrict__ y, int H, int I, unsigned char* ws, float* asraw) {
    const int n0 = blockIdx.x * 128, n = threadIdx.x, nbi = I / 128, nbh = H / 128;
    float (*as)[R][128] = reinterpret_cast<float (*)[R][128]>(asraw);
    const unsigned char* w2e = w2 + ((long long)e * H + n0) * I;
    auto row = [&](int rr) { return w2e + (long long)rr * I; };
    auto load_a = [&](int it, int m) { return z[(pbase + m) * I + it * 128 + n]; };
    const float* sc = fc2_scale + ((long long)e * nbh + (n0 + n) / 128) * nbi;
    auto scale = [&](int it) { return sc[it] * 128.0f; };
    float acc[R];
    rows_gemm<R>(ws, as, row, load_a, scale, I / 128, r, acc);
#pragma unroll
    for (int m = 0; m < R; ++m)
        if (m < r) y[(pbase + m) * H + n0 + n] = acc[m];
}

extern "C" __global__ void __launch_bounds__(128) fp8moe_rows2(
    const float* __restrict__ z, const unsigned char* __restrict__ w2, const float* __restrict__ fc2_scale,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles, float* __restrict__ y,
    int H, int I) {
    if ((int)blockIdx.y >= tiles[0]) return;
    const int e = tiles[1 + 2 * blockIdx.y], m0 = tiles[2 + 2 * blockIdx.y];
    const int r = min(cnt[e] - m0, BM);
    if (r > SMALL) return;
    extern __shared__ __align__(16) unsigned char ws[];
    __shared__ __align__(16) float asraw[2 * SMALL * 128];
    const long long pbase = (long long)off[e] + m0;
    if (r == 1) rows2<1>(z, w2, fc2_scale, e, r, pbase, y, H, I, ws, asraw);
    else if (r <= 4) rows2<4>(z, w2, fc2_scale, e, r, pbase, y, H, I, ws, asraw);
    else if (r <= 16) rows2<16>(z, w2, fc2_scale, e, r, pbase, y, H, I, ws, asraw);
    else rows2<SMALL>(z, w2, fc2_scale, e, r, pbase, y, H, I, ws, asraw);
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
    // Up to 8 slots at a time, their loads issued before the ordered sum: three memory trips
    // (ids and slot_pos, off, y) per group instead of three per slot (T = 1: 6.5 µs before).
    for (int k0 = 0; k0 < K; k0 += 8) {
        long long p[8];
        float wk[8];
        float4 v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const long long f = t * K + k0 + j;
            p[j] = k0 + j < K ? (long long)off[ids[f]] + slot_pos[f] : 0;
            wk[j] = k0 + j < K ? w[f] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = k0 + j < K ? *reinterpret_cast<const float4*>(y + p[j] * H + d) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (k0 + j >= K) break;
            const float4 q = make_float4(__fmul_rn(wk[j], v[j].x), __fmul_rn(wk[j], v[j].y), __fmul_rn(wk[j], v[j].z),
                                         __fmul_rn(wk[j], v[j].w));
            if (k0 + j == 0) acc = q;
            else acc = make_float4(__fadd_rn(acc.x, q.x), __fadd_rn(acc.y, q.y), __fadd_rn(acc.z, q.z), __fadd_rn(acc.w, q.w));
        }
    }
    const unsigned o = f_to_fnuz(acc.x) | (f_to_fnuz(acc.y) << 8) | (f_to_fnuz(acc.z) << 16) | (f_to_fnuz(acc.w) << 24);
    *reinterpret_cast<unsigned*>(out + t * H + d) = o;
}
