/* atrex:template
id = "tpl-paged-attention-decode-onepass"
title = "Paged decode attention in one pass per request and KV head: two dependent memory trips, K and V of a cache block per warp in registers"
operator = "paged_attention_decode"
architectures = ["hopper", "ampere", "ada", "blackwell"]
families = ["attention"]
bottlenecks = ["memory", "balanced"]
category = "algorithm"
expected_gain = "decode shapes read well under a megabyte: their time is the chain of dependent cold loads, not bandwidth. One block per (KV head, request) with every load that does not wait on another issued together cuts the chain to two trips (seq_lens, block table and query; then K and V) — 2x the split (flash-decoding) kernel on every shape"
pitfalls = ["a block-table entry past the sequence's end may hold anything: load K and V only for cache blocks below ceil(len / 16), and zero V's positions past len (0 · NaN is NaN)", "a split over the positions with a last-block combine adds two trips (the parts' stores, the arrival counter, the parts' loads): at these sizes it costs more than the parallelism gains", "the D = 256 body holds 2 × 16 uint4 per lane: template the head size, do not size the arrays for the largest"]
[measured]
s_op = 0.0778
baseline_s_op = 0.0180
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-12-03, `bench --full`, second-round harness: every timed sample checked, 5 seeds and every structured draw): S_op 0.078, every shape passing at the strict level (docs/measurements/bench-best-paged_attention_decode.json). The query heads of a KV head split over blocks (HB, chosen per shape so that the blocks stay within the 132 SMs): the decode shapes wait on per-head serial work (scores, softmax and P·V for each of G = 4-8 heads) in 32 blocks, not on memory. Per shape against the whole group per block (S_op 0.060): 3 0.028 -> 0.042, 4 0.070 -> 0.087, 6 0.067 -> 0.075, 7 0.054 -> 0.080, 1 0.009 -> 0.022; shapes 0, 2 and 5 unchanged (one head per KV head, or one block). Quick sweep (same day) per fixed HB: 1 -> S_op 0.065 (best for 1, 3, 4: 16-128 blocks), 2 -> 0.082 (best for 6, 7: 96-128 blocks; one head per block gives them 160-256 blocks re-reading K and V), 4 -> 0.069. What is left: the timing floor of one launch under the cold-L2 protocol is about 4.2 µs and these shapes run 6.7-8.9 µs; S 0.10 on shapes 6 and 7 needs 6.7 µs.
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 8/8 shapes pass strict on 5 seeds): S_op 0.0595 against the baseline's 0.018 and the split (flash-decoding) kernel's 0.026 it replaces; 3.3x the baseline (docs/measurements/bench-best-paged_attention_decode.json). The decode shapes (4 requests × 128 positions) 20-30 µs → 9.5-12.7 µs, the batched shape 0 0.217 → 0.268. Profile (shape 6, `profile --source`): 8.4 µs under the profiler, 32 blocks, latency-bound — warps wait on the K loads (the bf16 → f32 conversion of the first K register is the hot instruction) and on instruction fetch (cold code after the L2 flush); a variant with one code path for both dtypes (half the code) was slower (quick 0.051 vs 0.058).
/* atrex:plan
[[launch]]
kernel = "paged_decode_onepass"
grid = ["Hk", "S", "ceil((Hq // Hk) / if(HB == 0, if(Hk * S * (Hq // Hk) <= 132, 1, if(Hk * S * ceil((Hq // Hk) / 2) <= 132, 2, if(Hk * S * ceil((Hq // Hk) / 4) <= 132, 4, (Hq // Hk)))), min(HB, (Hq // Hk))))"]
block = [256]
smem = "4 * (9 * D + 128) * if(HB == 0, if(Hk * S * (Hq // Hk) <= 132, 1, if(Hk * S * ceil((Hq // Hk) / 2) <= 132, 2, if(Hk * S * ceil((Hq // Hk) / 4) <= 132, 4, (Hq // Hk)))), min(HB, (Hq // Hk)))"
args = ["out", "query", "k_cache", "v_cache", "block_tables", "seq_lens",
        "Hq:i32", "Hk:i32", "D:i32", "bs:i32", "mb:i32", "L:i32", "if(dtype == 'fp16', 1, 0):i32",
        "if(HB == 0, if(Hk * S * (Hq // Hk) <= 132, 1, if(Hk * S * ceil((Hq // Hk) / 2) <= 132, 2, if(Hk * S * ceil((Hq // Hk) / 4) <= 132, 4, (Hq // Hk)))), min(HB, (Hq // Hk))):i32"]

[tune]
# Query heads per block. 0: the fewest heads per block that keep Hk · S · ceil(G / heads) blocks
# within the 132 SMs of the H200 (1, 2, 4, else the whole group G = Hq / Hk of a KV head).
HB = [0, 1, 2, 4]

[defines]
HB = 0
*/
// paged_attention_decode in one pass per (KV head, request): a dependency chain of two cold
// memory trips. Step 1 issues together the sequence length, the block-table entries of the
// first round and the query; step 2 issues, per warp, the whole K and V of one 16-token cache
// block (each a contiguous D·16-element chunk) into registers. Eight warps take eight cache
// blocks per round; longer contexts take more rounds with an online softmax (block-wide max per
// head, per-warp partial P·V rescaled in shared memory).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#define MAXG 8
#define NW 8

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__device__ __forceinline__ void x8(const uint4& u, float (&f)[8]) {
    const T* h = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = to_f(h[k]);
}

template <typename T, int D>
__device__ __forceinline__ void onepass(T* __restrict__ out, const T* __restrict__ query,
                                        const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                                        const int* __restrict__ block_tables, const int* __restrict__ seq_lens,
                                        int Hq, int Hk, int mb, int L, int GB) {
    constexpr int J = D / 16;  // uint4 per lane for one cache block's K (and V)
    extern __shared__ float sm[];
    __shared__ float s_m[MAXG], s_l[MAXG], s_a[MAXG];
    const int GA = Hq / Hk;  // query heads of the KV head; this block takes GB of them from h0
    const int g = blockIdx.x, i = blockIdx.y;
    const int G = min(GB, GA - (int)blockIdx.z * GB);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    float* qs = sm;                 // [G][D] query · 1/sqrt(D)
    float* sc = qs + G * D;         // [G][NW*16] scores, then p
    float* ow = sc + G * NW * 16;   // [NW][G][D] partial o per warp
    const int h0 = g * GA + blockIdx.z * GB;
    const int* bt = block_tables + (long long)i * mb;
    // Step 1: independent loads together.
    const int len = seq_lens[i];
    int beta = warp < mb ? bt[warp] : 0;
    const float scale = rsqrtf((float)D);
    for (int idx = tid; idx < G * D / 8; idx += NW * 32) {
        const uint4 u = *reinterpret_cast<const uint4*>(query + ((long long)i * Hq + h0) * D + idx * 8);
        float f[8];
        x8<T>(u, f);
#pragma unroll
        for (int e = 0; e < 8; ++e) qs[idx * 8 + e] = f[e] * scale;
    }
    if (len > L || GB > MAXG || G <= 0) __trap();
    if (len <= 0) {
        for (int idx = tid; idx < G * D; idx += NW * 32) out[((long long)i * Hq + h0) * D + idx] = from_f<T>(0.0f);
        return;
    }
    for (int idx = tid; idx < NW * G * D; idx += NW * 32) ow[idx] = 0.0f;
    if (tid < MAXG) { s_m[tid] = -CUDART_INF_F; s_l[tid] = 0.0f; }
    const int nblk = (len + 15) / 16;
    for (int r0 = 0; r0 < nblk; r0 += NW) {
        const int blk = r0 + warp;
        const bool live = blk < nblk;
        if (r0 > 0) beta = live ? bt[blk] : 0;
        // Step 2: this warp's cache block, K and V together.
        uint4 kr[J], vr[J];
        if (live) {
            const uint4* kp = reinterpret_cast<const uint4*>(k_cache + ((long long)beta * Hk + g) * D * 16);
            const uint4* vp = reinterpret_cast<const uint4*>(v_cache + ((long long)beta * Hk + g) * D * 16);
#pragma unroll
            for (int j = 0; j < J; ++j) kr[j] = kp[lane + 32 * j];
#pragma unroll
            for (int j = 0; j < J; ++j) vr[j] = vp[lane + 32 * j];
        }
        __syncthreads();  // qs, ow and stats ready (first round); sc free (later rounds)
        // Scores: lane holds position o = lane % 16, x-vectors c = lane / 16 + 2j.
        const int o = lane & 15, pos = blk * 16 + o;
        for (int h = 0; h < G; ++h) {
            float dot = 0.0f;
            if (live) {
#pragma unroll
                for (int j = 0; j < J; ++j) {
                    float k[8];
                    x8<T>(kr[j], k);
                    const float4* q4 = reinterpret_cast<const float4*>(qs + h * D + 8 * ((lane >> 4) + 2 * j));
                    const float4 qa = q4[0], qb = q4[1];
                    dot = fmaf(qa.x, k[0], dot); dot = fmaf(qa.y, k[1], dot);
                    dot = fmaf(qa.z, k[2], dot); dot = fmaf(qa.w, k[3], dot);
                    dot = fmaf(qb.x, k[4], dot); dot = fmaf(qb.y, k[5], dot);
                    dot = fmaf(qb.z, k[6], dot); dot = fmaf(qb.w, k[7], dot);
                }
            }
            dot += __shfl_xor_sync(0xffffffffu, dot, 16);
            if (lane < 16) sc[h * NW * 16 + warp * 16 + o] = (live && pos < len) ? dot : -CUDART_INF_F;
        }
        __syncthreads();
        // Softmax statistics of this round, a warp per head.
        const int nr = min(NW * 16, len - r0 * 16);
        for (int h = warp; h < G; h += NW) {
            float* row = sc + h * NW * 16;
            float mx = -CUDART_INF_F;
            for (int p = lane; p < nr; p += 32) mx = fmaxf(mx, row[p]);
#pragma unroll
            for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            const float mold = s_m[h], mnew = fmaxf(mold, mx);
            float sum = 0.0f;
            for (int p = lane; p < NW * 16; p += 32) {
                const float e = p < nr ? __expf(row[p] - mnew) : 0.0f;
                row[p] = e;
                sum += e;
            }
#pragma unroll
            for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
            if (lane == 0) {
                const float a = __expf(mold - mnew);
                s_a[h] = a;
                s_l[h] = s_l[h] * a + sum;
                s_m[h] = mnew;
            }
        }
        __syncthreads();
        // P·V: lane holds dims d = lane / 2 + 16j, positions 8·(lane % 2) + e.
        if (live) {
            const int half = lane & 1;
            for (int h = 0; h < G; ++h) {
                const float* pr = sc + h * NW * 16 + warp * 16 + 8 * half;
                const float4 pa = *reinterpret_cast<const float4*>(pr);
                const float4 pb = *reinterpret_cast<const float4*>(pr + 4);
                const float a = s_a[h];
#pragma unroll
                for (int j = 0; j < J; ++j) {
                    float v[8];
                    x8<T>(vr[j], v);
                    if (pos - o + 8 * half + 8 > len) {  // positions past the end: no garbage in
#pragma unroll
                        for (int e = 0; e < 8; ++e)
                            if (blk * 16 + 8 * half + e >= len) v[e] = 0.0f;
                    }
                    float acc = pa.x * v[0];
                    acc = fmaf(pa.y, v[1], acc); acc = fmaf(pa.z, v[2], acc); acc = fmaf(pa.w, v[3], acc);
                    acc = fmaf(pb.x, v[4], acc); acc = fmaf(pb.y, v[5], acc);
                    acc = fmaf(pb.z, v[6], acc); acc = fmaf(pb.w, v[7], acc);
                    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
                    if (half == 0) {
                        float* dst = ow + (warp * G + h) * D + (lane >> 1) + 16 * j;
                        *dst = *dst * a + acc;
                    }
                }
            }
        } else {
            // A warp without a block this round still rescales what it holds.
            for (int idx = lane; idx < G * D; idx += 32) ow[warp * G * D + idx] *= s_a[idx / D];
        }
    }
    __syncthreads();
    for (int idx = tid; idx < G * D; idx += NW * 32) {
        const int h = idx / D;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; ++w) s += ow[w * G * D + idx];
        out[((long long)i * Hq + h0) * D + idx] = from_f<T>(s / s_l[h]);
    }
}

template <typename T>
__device__ __forceinline__ void dispatch(void* out, const void* q, const void* k, const void* v, const int* bt,
                                         const int* sl, int Hq, int Hk, int D, int mb, int L, int GB) {
    if (D == 128)
        onepass<T, 128>((T*)out, (const T*)q, (const T*)k, (const T*)v, bt, sl, Hq, Hk, mb, L, GB);
    else if (D == 256)
        onepass<T, 256>((T*)out, (const T*)q, (const T*)k, (const T*)v, bt, sl, Hq, Hk, mb, L, GB);
    else
        __trap();
}

extern "C" __global__ void __launch_bounds__(256) paged_decode_onepass(
    void* __restrict__ out, const void* __restrict__ query, const void* __restrict__ k_cache,
    const void* __restrict__ v_cache, const int* __restrict__ block_tables, const int* __restrict__ seq_lens,
    int Hq, int Hk, int D, int bs, int mb, int L, int is_fp16, int GB) {
    if (bs != 16) __trap();
    if (is_fp16) dispatch<__half>(out, query, k_cache, v_cache, block_tables, seq_lens, Hq, Hk, D, mb, L, GB);
    else dispatch<__nv_bfloat16>(out, query, k_cache, v_cache, block_tables, seq_lens, Hq, Hk, D, mb, L, GB);
}
