/* atrex:template
id = "tpl-paged-attention-decode-split"
title = "Paged decode attention split over the positions (flash-decoding) in one launch: the last block of each head group combines"
operator = "paged_attention_decode"
architectures = ["hopper", "ampere", "ada", "blackwell"]
families = ["attention"]
bottlenecks = ["memory", "balanced"]
category = "algorithm"
expected_gain = "decode shapes hold a few requests x KV heads: splitting each over its cache blocks fills the SMs; the partial softmax results are combined by the last block to arrive, so one launch does it all"
pitfalls = ["the arrival counter must start at zero for every run: a zeroed scratch (zero = true), not a counter the kernel resets", "write the partial results, __threadfence, then count the arrival; the last block reads the parts with __ldcg (not through a stale L1)", "an empty part must still arrive, with m = -inf and l = 0", "at a few microseconds the kernel is a chain of dependent cold-L2 loads (seq_lens, block table, K, V, parts): more blocks do not shorten it"]
[measured]
s_op = 0.0261
baseline_s_op = 0.018
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "full"
*/
/* atrex:plan
# NS = the number of splits of each request's positions: enough blocks to fill the GPU
# (2 × 132 SMs), at most one per 16-token cache block.
[[launch]]
kernel = "paged_decode_split"
grid = ["Hk", "S", "max(1, min(mb, ceil(264 / (Hk * S))))"]
block = [128]
smem = "4 * ((Hq // Hk) * D + (Hq // Hk) * 16 * ceil(mb / max(1, min(mb, ceil(264 / (Hk * S))))))"
args = ["out", "query", "k_cache", "v_cache", "block_tables", "seq_lens", "part", "arrived",
        "Hq:i32", "Hk:i32", "D:i32", "bs:i32", "mb:i32", "L:i32", "if(dtype == 'fp16', 1, 0):i32"]

[[scratch]]
name = "part"      # per (request, KV head, split, head of the group): m, l, o[D]
dtype = "fp32"
size = "S * Hk * max(1, min(mb, ceil(264 / (Hk * S)))) * (Hq // Hk) * (D + 2)"

[[scratch]]
name = "arrived"   # per (request, KV head): splits done
dtype = "int32"
size = "S * Hk"
zero = true
*/
// paged_attention_decode, split over the positions (flash-decoding) in one launch. Decode shapes
// hold a few requests × KV heads: one block per (KV head, request) leaves most SMs idle, so each
// (KV head, request) is split into NS parts of whole 16-token cache blocks (grid z), enough to
// give the GPU about two blocks per SM. A block serves the whole GQA group (Hq/Hk ≤ 8 heads), so
// every K/V byte is read once:
//  1. scores of its positions: one warp per position, lane c dots the 16-byte x-vector
//     k_cache[β, g, c, o, 0:8] with every head of the group; a shuffle reduction per head;
//  2. softmax of its part per head (max m, sum l, p = exp(s − m)), fp32;
//  3. o[h][d] = Σ_p p[h][p] · v[p][d], a thread per dimension (two 16-byte loads of the 16
//     positions of a cache block);
//  4. with one part the block writes out = o / l; otherwise it stores (m, l, o) and the last
//     block of the (KV head, request) to arrive (a counter zeroed by the harness before every
//     run; writes made visible by __threadfence) combines the parts:
//     out = Σ_s o_s e^(m_s − M) / Σ_s l_s e^(m_s − M).
//
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 8/8 shapes strict on 5 seeds): S_op 0.026
// against the baseline's 0.018 (docs/measurements/bench-best-paged_attention_decode.json): the
// decode shapes 1.1-1.5x (shape 3 0.0075 → 0.0083, 4 0.023 → 0.034, 6 0.021 → 0.030, 7 0.016 →
// 0.022), the large batched shape 0 slower (0.296 → 0.217: there is one part per head group and
// this kernel's per-position work is not the baseline's). The decode shapes read 0.2-1 MB and
// still take 20-60 µs: under the profiler shape 5 (8 blocks) runs 31 µs with DRAM and SMs idle,
// stalled on dependent global loads (cold L2 after the harness's flush: seq_lens, the block
// table, K, V, the parts — each a full memory latency and a TLB walk). The kernel's dependency
// chain, not its bandwidth, is the limit: issuing the query, K and V loads of a part together
// gained 4 % (0.025 → 0.026); a variant with every loop rolled (smaller code, no
// instruction-fetch stalls) was slower (quick 0.016).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#define MAXG 8  // largest GQA group in the suite (Hq/Hk ∈ {1, 4, 5, 8})

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__device__ __forceinline__ void x8_to_f32(const uint4& u, float (&f)[8]) {
    const T* h = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = to_f(h[k]);
}

template <typename T>
__device__ __forceinline__ void split_body(T* __restrict__ out, const T* __restrict__ query,
                                           const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                                           const int* __restrict__ block_tables, const int* __restrict__ seq_lens,
                                           float* __restrict__ part, int* __restrict__ arrived, int Hq, int Hk,
                                           int D, int bs, int mb, int L) {
    extern __shared__ float sm[];
    __shared__ float ml[MAXG][2];
    __shared__ int last;
    const int G = Hq / Hk;
    const int g = blockIdx.x, i = blockIdx.y, s = blockIdx.z, ns = gridDim.z;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int cpb = (mb + ns - 1) / ns, CH = 16 * cpb;  // positions per part
    float* qs = sm;           // [G][D], scaled by 1/sqrt(D)
    float* sc = qs + G * D;   // [G][CH]
    const int len = seq_lens[i];
    const int h0 = g * G;
    if (len > L || G > MAXG || bs != 16 || D % 128 != 0 || D > 256) __trap();
    if (len <= 0) {
        if (s == 0)
            for (int idx = tid; idx < G * D; idx += blockDim.x)
                out[((long long)i * Hq + h0) * D + idx] = from_f<T>(0.0f);
        return;
    }
    const int p0 = s * CH, n = max(0, min(len, p0 + CH) - p0);  // this part's positions
    const float scale = 1.0f / sqrtf((float)D);
    const int* bt = block_tables + (long long)i * mb;
    const int nc = D / 8;
    // Every load that does not depend on a result goes out first, together: the query, the
    // first K x-vectors of this warp's positions and the V rows of the first cache block (cold
    // L2: each dependent round trip costs a full memory latency).
    uint4 kpre[4], vpre[2][2];
    const long long beta0 = n > 0 ? bt[p0 / 16] : 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int pp = warp + 4 * j;
        kpre[j] = make_uint4(0, 0, 0, 0);
        if (pp < n && pp < 16 && lane < nc)
            kpre[j] = *reinterpret_cast<const uint4*>(k_cache + (((beta0 * Hk + g) * nc + lane) * 16 + (p0 + pp) % 16) * 8);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int d = tid + 128 * j;
        vpre[j][0] = vpre[j][1] = make_uint4(0, 0, 0, 0);
        if (n > 0 && d < D) {
            const uint4* vp = reinterpret_cast<const uint4*>(v_cache + ((beta0 * Hk + g) * D + d) * 16);
            vpre[j][0] = vp[0];
            vpre[j][1] = vp[1];
        }
    }
    for (int idx = tid; idx < G * D; idx += blockDim.x)
        qs[idx] = to_f(query[((long long)i * Hq + h0) * D + idx]);
    __syncthreads();

    // 1. scores: warp w takes positions w, w + 4, ...; lane c < D/8 one 8-wide x-vector
    for (int pp = warp; pp < n; pp += blockDim.x / 32) {
        const int p = p0 + pp;
        float k[8];
        if (pp < 16 && lane < nc) {
            x8_to_f32<T>(kpre[pp / 4], k);
        } else if (lane < nc) {
            const long long beta = bt[p / 16];
            const uint4 raw = *reinterpret_cast<const uint4*>(k_cache + (((beta * Hk + g) * nc + lane) * 16 + p % 16) * 8);
            x8_to_f32<T>(raw, k);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) k[e] = 0.0f;
        }
#pragma unroll
        for (int hh = 0; hh < MAXG; ++hh) {
            if (hh < G) {
                float dot = 0.0f;
                if (lane < nc) {
                    const float* qq = qs + hh * D + lane * 8;
#pragma unroll
                    for (int e = 0; e < 8; ++e) dot = fmaf(qq[e], k[e], dot);
                }
#pragma unroll
                for (int w = 16; w > 0; w >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, w);
                if (lane == 0) sc[hh * CH + pp] = dot * scale;
            }
        }
    }
    __syncthreads();

    // 2. softmax of this part, per head
    for (int hh = warp; hh < G; hh += blockDim.x / 32) {
        float* row = sc + hh * CH;
        float mx = -CUDART_INF_F;
        for (int p = lane; p < n; p += 32) mx = fmaxf(mx, row[p]);
#pragma unroll
        for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
        float sum = 0.0f;
        for (int p = lane; p < n; p += 32) {
            const float e = __expf(row[p] - mx);
            row[p] = e;
            sum += e;
        }
#pragma unroll
        for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
        if (lane == 0) { ml[hh][0] = mx; ml[hh][1] = sum; }
    }
    __syncthreads();

    // 3. P·V, a thread per dimension
    float* mine = part + (((long long)i * Hk + g) * ns + s) * G * (D + 2);
    for (int d = tid; d < D; d += blockDim.x) {
        float o[MAXG];
#pragma unroll
        for (int hh = 0; hh < MAXG; ++hh) o[hh] = 0.0f;
        for (int b0 = 0; b0 < n; b0 += 16) {
            uint4 r0, r1;
            if (b0 == 0) {
                r0 = vpre[d / 128][0];
                r1 = vpre[d / 128][1];
            } else {
                const long long beta = bt[(p0 + b0) / 16];
                const uint4* vp = reinterpret_cast<const uint4*>(v_cache + ((beta * Hk + g) * D + d) * 16);
                r0 = vp[0];
                r1 = vp[1];
            }
            float v[16];
            float* v0 = v;
            x8_to_f32<T>(r0, *reinterpret_cast<float(*)[8]>(v0));
            x8_to_f32<T>(r1, *reinterpret_cast<float(*)[8]>(v0 + 8));
            const int m = min(16, n - b0);
#pragma unroll
            for (int hh = 0; hh < MAXG; ++hh)
                if (hh < G)
                    for (int p = 0; p < m; ++p) o[hh] = fmaf(sc[hh * CH + b0 + p], v[p], o[hh]);
        }
#pragma unroll
        for (int hh = 0; hh < MAXG; ++hh) {
            if (hh >= G) continue;
            if (ns == 1) out[((long long)i * Hq + h0 + hh) * D + d] = from_f<T>(o[hh] / ml[hh][1]);
            else mine[hh * (D + 2) + 2 + d] = o[hh];
        }
    }
    if (ns == 1) return;
    if (tid < G) {
        mine[tid * (D + 2)] = n > 0 ? ml[tid][0] : -CUDART_INF_F;
        mine[tid * (D + 2) + 1] = n > 0 ? ml[tid][1] : 0.0f;
    }
    // 4. the last part to arrive combines
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&arrived[i * Hk + g], 1) == ns - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* all = part + ((long long)i * Hk + g) * ns * G * (D + 2);
    for (int d = tid; d < D; d += blockDim.x) {
#pragma unroll
        for (int hh = 0; hh < MAXG; ++hh) {
            if (hh >= G) continue;
            float M = -CUDART_INF_F;
            for (int q = 0; q < ns; ++q) M = fmaxf(M, __ldcg(all + (q * G + hh) * (D + 2)));
            float lsum = 0.0f, osum = 0.0f;
            for (int q = 0; q < ns; ++q) {
                const float* pq = all + (q * G + hh) * (D + 2);
                const float w = __expf(__ldcg(pq) - M);
                lsum = fmaf(__ldcg(pq + 1), w, lsum);
                osum = fmaf(__ldcg(pq + 2 + d), w, osum);
            }
            out[((long long)i * Hq + h0 + hh) * D + d] = from_f<T>(osum / lsum);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) paged_decode_split(
    void* __restrict__ out, const void* __restrict__ query, const void* __restrict__ k_cache,
    const void* __restrict__ v_cache, const int* __restrict__ block_tables, const int* __restrict__ seq_lens,
    float* __restrict__ part, int* __restrict__ arrived, int Hq, int Hk, int D, int bs, int mb, int L, int is_fp16) {
    if (is_fp16)
        split_body<__half>((__half*)out, (const __half*)query, (const __half*)k_cache, (const __half*)v_cache,
                           block_tables, seq_lens, part, arrived, Hq, Hk, D, bs, mb, L);
    else
        split_body<__nv_bfloat16>((__nv_bfloat16*)out, (const __nv_bfloat16*)query, (const __nv_bfloat16*)k_cache,
                                  (const __nv_bfloat16*)v_cache, block_tables, seq_lens, part, arrived, Hq, Hk, D,
                                  bs, mb, L);
}
