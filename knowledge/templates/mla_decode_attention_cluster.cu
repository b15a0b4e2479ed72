/* atrex:template
id = "tpl-mla-decode-attention-cluster"
title = "MLA decode attention: a cluster of blocks per request and head group, each a slice of the positions, combined through distributed shared memory"
operator = "mla_decode_attention"
architectures = ["hopper"]
families = ["attention"]
bottlenecks = ["memory", "balanced"]
category = "parallelism"
expected_gain = "the baseline's one block per (request, 16 heads) leaves 100+ SMs idle and walks 128-256 rows serially; a cluster per (request, 4 heads) splitting the rows, with the partial softmax results combined over DSMEM in the same launch, spreads the work without a second kernel or global partials"
pitfalls = ["the combine reads the other blocks' shared memory: a second cluster barrier keeps every block alive until all have read", "an empty slice still takes part, with m = -inf and l = 0", "every block of a cluster must leave by the same path (a request with seq_len <= 0 returns before the first barrier in all of them)", "the heads' query chunks live in registers for all rows: more heads per block (8, 16) cost occupancy and were slower"]
[measured]
s_op = 0.0157
baseline_s_op = 0.0028
gpu = "NVIDIA H200"
date = "2026-12-01"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 3/3 shapes pass strict on 5 seeds): S_op 0.016 (0.0157) against the baseline's 0.0028; 5.6x the baseline (docs/measurements/bench-best-mla_decode_attention.json): 96 → 22.5 µs (shape 0, 4 requests × 128 heads), 171 → 21 µs (shape 2). Variants (quick): HG 4 / 8 / 16 heads per block with NSPL 4: 0.0116 / 0.0106 / 0.0087; NSPL 2 / 4 / 8 with HG 4 and the queries in registers: 0.0158 / 0.0098 / 0.0065. Profile (shape 0, NSPL 4): 29 µs, latency-bound on shared memory (short_scoreboard 44 %, 38 % of the wavefronts bank-conflicted), SM 34 %: at one row per warp and four heads per block the CUDA-core dots are far from the 2 µs the FLOPs need — tensor cores (mma.sync over 16 heads) are the next step.
/* atrex:plan
[[launch]]
kernel = "mla_decode_cluster"
grid = ["NSPL", "ceil(H / HG)", "B"]
cluster = ["NSPL", "1", "1"]
block = [256]
smem = "4 * HG * Dqk + 2 * ceil(S / NSPL) * Dqk + 4 * HG * ceil(S / NSPL) + 4 * HG * L"
args = ["out", "q", "kv_cache", "seq_lens", "B:i32", "H:i32", "L:i32", "Dqk:i32", "S:i32"]

[tune]
HG = [4, 8, 16]     # query heads per block (all share the one latent KV row)
NSPL = [2, 4, 8]    # blocks of a cluster, each a slice of the positions
*/
// mla_decode_attention: a cluster of NSPL blocks per (request, group of HG query heads), each
// block a slice of the request's positions, combined through distributed shared memory — no
// second launch, no global partial results.
//  1. Together: the request's offset (prefix sum of seq_lens, B ≤ a few), its length and the
//     HG queries (fp32 in shared memory); then the slice's latent rows (576 bf16 each) into
//     shared memory with 16-byte cp.async, one trip.
//  2. Scores: a warp per row, lane c dots the 16-byte chunks c, c + 32, c + 64 with every head
//     (the heads' query chunks held in the lane's registers for all rows).
//  3. The slice's softmax per head (max m, sum l, p = e^(s − m)), fp32.
//  4. P·V: a thread per pair of the 512 value dims, all HG heads; o stays in shared memory.
//  5. Cluster barrier; block r combines the dims [r·L/NSPL, (r+1)·L/NSPL) of every head from
//     all NSPL blocks' (m, l, o) (ld.shared::cluster): out = Σ o_s e^(m_s − M) / Σ l_s e^(m_s − M);
//     a second barrier keeps every block's shared memory alive until all have read it.
#include <cuda_bf16.h>
#include <math_constants.h>

#ifndef HG
#define HG 4
#endif
#ifndef NSPL
#define NSPL 2
#endif
#define NT 256

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}
// Not volatile: between the two cluster barriers the remote values do not change, and the
// compiler may then issue a thread's remote loads together (one latency, not one each).
__device__ __forceinline__ float ld_cluster(const float* p, unsigned int rank) {
    unsigned int a = smem_addr(p), r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    float v;
    asm("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r));
    return v;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(NT) mla_decode_cluster(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ kv_cache, const int* __restrict__ seq_lens, int B, int H, int L,
    int Dqk, int S) {
    extern __shared__ __align__(16) float sm[];
    __shared__ float s_m[HG], s_l[HG];
    const int P = (S + NSPL - 1) / NSPL;  // rows per block at most
    float* qs = sm;                                              // [HG][Dqk]
    __nv_bfloat16* kvs = reinterpret_cast<__nv_bfloat16*>(qs + HG * Dqk);  // [P][Dqk]
    float* sc = reinterpret_cast<float*>(kvs + P * Dqk);         // [P][HG]
    float* os = sc + HG * P;                                     // [HG][L]
    unsigned int rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int i = blockIdx.z, h0 = blockIdx.y * HG, tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int hg = min(HG, H - h0);
    if (Dqk % 8 != 0 || L % (2 * NSPL) != 0 || Dqk > 96 * 8 || (HG % 4) != 0) __trap();
    // 1. offset, length, queries: independent loads together
    long long off = 0;
    for (int j = 0; j < i; ++j) off += seq_lens[j];
    const int len = seq_lens[i];
    for (int idx = tid; idx < HG * Dqk / 8; idx += NT) {
        const int hh = idx / (Dqk / 8);
        float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (hh < hg) {
            const uint4 u = *reinterpret_cast<const uint4*>(q + ((long long)i * H + h0) * Dqk + idx * 8);
            const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 x = __bfloat1622float2(b2[k]);
                f[2 * k] = x.x;
                f[2 * k + 1] = x.y;
            }
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) qs[idx * 8 + k] = f[k];
    }
    if (len > S) __trap();
    if (len <= 0) {
        for (int idx = tid; idx < hg * (L / NSPL); idx += NT) {
            const int hh = idx / (L / NSPL), d = rank * (L / NSPL) + idx % (L / NSPL);
            out[((long long)i * H + h0 + hh) * L + d] = __float2bfloat16_rn(0.0f);
        }
        return;  // every block of the cluster returns here (same request)
    }
    const int per = (len + NSPL - 1) / NSPL;
    const int p0 = rank * per, n = max(0, min(len, p0 + per) - p0);
    // this slice's rows, 16 bytes at a time
    const __nv_bfloat16* rows = kv_cache + (off + p0) * Dqk;
    const int v16 = Dqk / 8;
    for (int idx = tid; idx < n * v16; idx += NT) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(kvs + idx * 8)),
                     "l"(rows + (long long)idx * 8)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
    __syncthreads();

    // 2. scores: lane c holds the queries' chunks c, c + 32, c + 64 in registers
    const float scale = rsqrtf((float)Dqk);
    constexpr int CS = 3;  // chunk slots per lane (Dqk / 8 ≤ 96)
    float qr[CS][HG][8];
#pragma unroll
    for (int j = 0; j < CS; ++j) {
        const int c = lane + 32 * j;
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) {
#pragma unroll
            for (int e = 0; e < 8; ++e) qr[j][hh][e] = c < v16 ? qs[hh * Dqk + c * 8 + e] : 0.0f;
        }
    }
    for (int r = warp; r < n; r += NT / 32) {
        float dot[HG];
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) dot[hh] = 0.0f;
#pragma unroll
        for (int j = 0; j < CS; ++j) {
            const int c = lane + 32 * j;
            if (c < v16) {
                const uint4 u = reinterpret_cast<const uint4*>(kvs + r * Dqk)[c];
                const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&u);
                float k[8];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 x = __bfloat1622float2(b2[e]);
                    k[2 * e] = x.x;
                    k[2 * e + 1] = x.y;
                }
#pragma unroll
                for (int hh = 0; hh < HG; ++hh) {
                    float d = dot[hh];
#pragma unroll
                    for (int e = 0; e < 8; ++e) d = fmaf(qr[j][hh][e], k[e], d);
                    dot[hh] = d;
                }
            }
        }
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) {
            float d = dot[hh];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            if (lane == 0) sc[r * HG + hh] = d * scale;
        }
    }
    __syncthreads();
    // 3. the slice's softmax, a warp per head
    for (int hh = warp; hh < HG; hh += NT / 32) {
        float mx = -CUDART_INF_F;
        for (int r = lane; r < n; r += 32) mx = fmaxf(mx, sc[r * HG + hh]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.0f;
        for (int r = lane; r < n; r += 32) {
            const float e = __expf(sc[r * HG + hh] - mx);
            sc[r * HG + hh] = e;
            sum += e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) {
            s_m[hh] = n > 0 ? mx : -CUDART_INF_F;
            s_l[hh] = sum;
        }
    }
    __syncthreads();
    // 4. P·V, a thread per pair of value dims
    for (int d2 = tid; d2 < L / 2; d2 += NT) {
        float ax[HG], ay[HG];
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) ax[hh] = ay[hh] = 0.0f;
        for (int r = 0; r < n; ++r) {
            const float2 v = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(kvs + r * Dqk)[d2]);
#pragma unroll
            for (int hh = 0; hh < HG; ++hh) {
                const float p = sc[r * HG + hh];  // [r][HG]: one broadcast vector load per row
                ax[hh] = fmaf(p, v.x, ax[hh]);
                ay[hh] = fmaf(p, v.y, ay[hh]);
            }
        }
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) {
            os[hh * L + 2 * d2] = ax[hh];
            os[hh * L + 2 * d2 + 1] = ay[hh];
        }
    }
    // 5. combine across the cluster
    cluster_sync();
    const int W = L / NSPL;
    for (int idx = tid; idx < hg * W; idx += NT) {
        const int hh = idx / W, d = rank * W + idx % W;
        float mr[NSPL], lr[NSPL], orr[NSPL], M = -CUDART_INF_F;
#pragma unroll
        for (int s = 0; s < NSPL; ++s) {
            mr[s] = ld_cluster(s_m + hh, s);
            lr[s] = ld_cluster(s_l + hh, s);
            orr[s] = ld_cluster(os + hh * L + d, s);
        }
#pragma unroll
        for (int s = 0; s < NSPL; ++s) M = fmaxf(M, mr[s]);
        float lsum = 0.0f, osum = 0.0f;
#pragma unroll
        for (int s = 0; s < NSPL; ++s) {
            const float w = __expf(mr[s] - M);
            lsum = fmaf(lr[s], w, lsum);
            osum = fmaf(orr[s], w, osum);
        }
        out[((long long)i * H + h0 + hh) * L + d] = __float2bfloat16_rn(osum / lsum);
    }
    cluster_sync();
}
