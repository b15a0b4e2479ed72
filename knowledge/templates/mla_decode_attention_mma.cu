/* atrex:template
id = "tpl-mla-decode-attention-mma"
title = "MLA decode attention on tensor cores: 16 heads per block as one mma tile, a cluster of blocks over the positions, combined through distributed shared memory"
operator = "mla_decode_attention"
architectures = ["hopper"]
families = ["attention"]
bottlenecks = ["memory", "balanced"]
category = "algorithm"
expected_gain = "the 16 query heads of a block are the M = 16 of mma.sync m16n8k16: both products (Q·Kᵀ over 576 dims, P·V over 512) run on the tensor cores instead of one CUDA-core dot per head, row and lane, and every shared-memory read is an ldmatrix of a padded row (no bank conflicts)"
pitfalls = ["rows past the slice's end must be zero in shared memory (cp.async with source size 0): P = 0 times a stale NaN is NaN", "P in fp16 (one mma per tile) missed the strict tolerance (2 bf16 ulps, atol 1e-4) on one output near zero in 262144 when a block took 128 positions: P as bf16 hi + lo (16 significant bits) against bf16 V keeps it, at two mma per tile", "a 576-element row (1152 bytes) puts every row's chunk in the same banks: pad rows to 584 elements so that ldmatrix's eight rows fall in eight bank groups", "the cluster's size is the number of slices: the combine splits the 512 dims among the blocks in even chunks, whatever the size", "an empty slice still takes part in the combine, with m = -inf and l = 0", "the slice's rows in one cp.async trip, not rounds of 32: each further round is another dependent cold trip (about 5 µs each when one block of shape 1 took all 256 rows in rounds)", "eight blocks of 32 positions beat fewer, longer slices: slices of 128 rows cost 150 KB of shared memory and serialise 16 n8 tiles per warp"]
[measured]
s_op = 0.0210
baseline_s_op = 0.0028
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.021, every shape passing at the strict level (docs/measurements/bench-best-mla_decode_attention.json).
// Measured (NVIDIA H200, 2026-12-02, `bench --full`, 3/3 shapes pass strict on 5 seeds, rel_l2 ≤ 1.3e-4): S_op 0.0224 against the baseline's 0.0028 and the CUDA-core cluster kernel's 0.0157 it replaces (docs/measurements/bench-best-mla_decode_attention.json): shape 0 (4 requests × 128 heads × 128 positions) 22.6 → 15.9 µs, shape 1 20.1 → 12.4 µs, shape 2 21.1 → 13.1 µs. Variants (quick, same lease): NSPL 8 / 4 / 2 / 1 0.0221 / 0.0220 / 0.0184 / 0.0133 (NSPL 8 gives S = 256 eight slices of 32 and S = 128 four); an earlier version with fp16 P (one mma per tile) and the slice loaded in rounds of 32 rows: 0.0219, and one output in 262144 outside the strict tolerance with NSPL 1. Limiter (from the timings; not profiled, the lease's device time was spent): latency, not the tensor cores or bandwidth. The kernel is two dependent cold memory trips (the lengths, then the rows) plus the combine; shape 1 with 8 blocks takes 12.4 µs for the same per-block work as shape 0's 128 blocks (15.9 µs), and the plainest kernels of this suite take 4.2 µs under the harness's cold-L2 timing. The target S_op 0.05 needs shape 0 at 7 µs: about one cold trip.
/* atrex:plan
[[launch]]
kernel = "mla_decode_mma"
grid = ["max(min(NSPL, ceil(S / 32)), ceil(S / 128))", "ceil(H / 16)", "B"]
cluster = ["max(min(NSPL, ceil(S / 32)), ceil(S / 128))", "1", "1"]
block = [128]
smem = "2 * 16 * 584 + (2 * 584 + 4 * 16) * 32 * ceil(ceil(S / max(min(NSPL, ceil(S / 32)), ceil(S / 128))) / 32) + 4 * 16 * 8"
args = ["out", "q", "kv_cache", "seq_lens", "H:i32", "L:i32", "Dqk:i32", "S:i32"]

[tune]
NSPL = [8, 4, 2, 1]   # blocks of a cluster at most (slices of 32 to 128 positions; S ≤ 1024)
*/
// mla_decode_attention with mma.sync: a block per (slice of the positions, 16 query heads,
// request); the slices of one (heads, request) are a cluster, combined through distributed
// shared memory in the same launch. Two dependent memory trips: the lengths with the queries,
// then the slice's latent rows.
//  1. Together: the lengths up to the request (its offset and its own) and, by cp.async, the 16
//     heads' queries into padded shared-memory rows.
//  2. The slice's latent rows (576 bf16 each), all at once by cp.async; rows past the slice's
//     end, up to a multiple of 16, are zero-filled.
//  3. S = Q·Kᵀ: warp w takes the slice's n8 tiles w, w + 4, ... over the 36 k-steps of 16,
//     A and B by ldmatrix, two accumulator chains; scores · 1/24 to shared memory, masked.
//  4. The slice's softmax per head (a warp per four heads): m, l, p = e^(s − m) in place.
//  5. O = P·V: warp w takes the value dims 128w..128w+127 (16 n8 tiles), V by ldmatrix.trans;
//     P as bf16 hi + lo, two mma per tile, O in fp32 registers.
//  6. O to shared memory over the K/V buffer; cluster barrier; block r combines the dims of its
//     share from every block's (m, l, O): out = Σ O_s e^(m_s − M) / Σ l_s e^(m_s − M); a second
//     barrier keeps every block's shared memory alive until all have read it.
#include <cuda_bf16.h>
#include <math_constants.h>

#ifndef NSPL
#define NSPL 8
#endif
#define NT 128
#define HB 16    // query heads per block: the M of one mma tile
#define PC 32    // the slice buffer holds a multiple of 32 rows
#define DQK 576  // key width (latent 512 + rope 64)
#define LV 512   // value width
#define RS 584   // shared row stride in elements: 1168 bytes, each row 16 bytes further along the banks
#define MAXC 8   // the largest cluster

typedef unsigned int u32;

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// 16 bytes global → shared; with valid false, 16 zero bytes (nothing is read).
__device__ __forceinline__ void cp16(u32 dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void ldsm4(u32 a, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}
__device__ __forceinline__ void ldsm4t(u32 a, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Two floats → bf16x2, x0 in the low half.
__device__ __forceinline__ u32 pack_bf2(float x0, float x1) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
    return r;
}
// x ≈ hi + lo with hi = bf16(x), lo = bf16(x − hi): 16 significant bits in two bf16 operands.
__device__ __forceinline__ void split_bf2(float x0, float x1, u32& hi, u32& lo) {
    hi = pack_bf2(x0, x1);
    lo = pack_bf2(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}
__device__ __forceinline__ float2 ld_cluster2(const float* p, u32 rank) {
    u32 a = smem_u32(p), r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    float2 v;
    asm("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(r));
    return v;
}
__device__ __forceinline__ float ld_cluster(const float* p, u32 rank) {
    u32 a = smem_u32(p), r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    float v;
    asm("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r));
    return v;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(NT) mla_decode_mma(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ kv_cache, const int* __restrict__ seq_lens, int H, int L,
    int Dqk, int S) {
    extern __shared__ __align__(128) unsigned char smraw[];
    __shared__ float s_m[HB], s_l[HB];
    u32 rank, nspl;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nspl));
    if (Dqk != DQK || L != LV || nspl > MAXC) __trap();
    const int i = blockIdx.z, h0 = blockIdx.y * HB, tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int hg = min(HB, H - h0);
    // rows of the slice buffer: the plan sizes it for ceil(S / nspl) rounded up to 32
    const int cap = (((S + (int)nspl - 1) / (int)nspl) + PC - 1) / PC * PC;
    const int scs = cap + 8;  // score row stride in floats
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smraw);  // [HB][RS]
    __nv_bfloat16* kvs = qs + HB * RS;                              // [cap][RS]
    float* sc = reinterpret_cast<float*>(kvs + cap * RS);           // [HB][scs]
    float* os = reinterpret_cast<float*>(kvs);                      // [HB][LV], after P·V

    // 1. the lengths before the request (its offset) and its own, then the queries: one trip
    int sl[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) sl[j] = j <= i ? seq_lens[j] : 0;
    const __nv_bfloat16* qg = q + ((long long)i * H + h0) * DQK;
    for (int idx = tid; idx < HB * (DQK / 8); idx += NT) {
        const int h = idx / (DQK / 8), c = idx % (DQK / 8);
        cp16(smem_u32(qs + h * RS + c * 8), h < hg ? qg + h * DQK + c * 8 : q, h < hg);
    }
    long long off = 0;
    int len = i < 8 ? 0 : seq_lens[i];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        off += j < i ? sl[j] : 0;
        len = j == i ? sl[j] : len;
    }
    for (int j = 8; j < i; ++j) off += seq_lens[j];
    len = max(len, 0);
    if (len > S) __trap();
    const int per = (len + (int)nspl - 1) / (int)nspl;
    const int p0 = min(len, (int)rank * per), n = min(len, p0 + per) - p0;
    // 2. the slice's rows, all at once (rows past n zero-filled up to a multiple of 16)
    const int n16 = (n + 15) / 16 * 16;
    const __nv_bfloat16* rows = kv_cache + (off + p0) * DQK;
    for (int idx = tid; idx < n16 * (DQK / 8); idx += NT) {
        const int r = idx / (DQK / 8), c = idx % (DQK / 8);
        cp16(smem_u32(kvs + r * RS + c * 8), r < n ? rows + (long long)r * DQK + c * 8 : kv_cache, r < n);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
    __syncthreads();

    // 3. S = Q·Kᵀ: warp w takes the n8 tiles w, w + 4, ... of the slice
    const float scale = 1.0f / 24.0f;  // 1/sqrt(576)
    const u32 qa = smem_u32(qs + (((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (lane >> 4) * 8);
    for (int jt = warp; jt * 8 < n16; jt += NT / 32) {
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        const u32 kb = smem_u32(kvs + (jt * 8 + (lane & 7)) * RS + (lane >> 3) * 8);
#pragma unroll
        for (int kk = 0; kk < DQK / 32; ++kk) {
            u32 b0, b1, b2, b3, a0, a1, a2, a3;
            ldsm4(kb + kk * 64, b0, b1, b2, b3);
            ldsm4(qa + kk * 64, a0, a1, a2, a3);
            mma_bf16(acc[0], a0, a1, a2, a3, b0, b1);
            ldsm4(qa + kk * 64 + 32, a0, a1, a2, a3);
            mma_bf16(acc[1], a0, a1, a2, a3, b2, b3);
        }
        const int col = jt * 8 + 2 * t;
        const float ninf = -CUDART_INF_F;
        sc[g * scs + col] = col < n ? (acc[0][0] + acc[1][0]) * scale : ninf;
        sc[g * scs + col + 1] = col + 1 < n ? (acc[0][1] + acc[1][1]) * scale : ninf;
        sc[(g + 8) * scs + col] = col < n ? (acc[0][2] + acc[1][2]) * scale : ninf;
        sc[(g + 8) * scs + col + 1] = col + 1 < n ? (acc[0][3] + acc[1][3]) * scale : ninf;
    }
    __syncthreads();

    // 4. the slice's softmax: warp w, heads 4w..4w+3; p = e^(s − m) in place
#pragma unroll
    for (int hh = 0; hh < 4; ++hh) {
        const int h = warp * 4 + hh;
        float mx = -CUDART_INF_F;
        for (int j = lane; j < n16; j += 32) mx = fmaxf(mx, sc[h * scs + j]);
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, s));
        const float mref = mx == -CUDART_INF_F ? 0.0f : mx;
        float sum = 0.0f;
        for (int j = lane; j < n16; j += 32) {
            const float p = __expf(sc[h * scs + j] - mref);
            sc[h * scs + j] = p;
            sum += p;
        }
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
        if (lane == 0) {
            s_m[h] = mx;
            s_l[h] = sum;
        }
    }
    __syncthreads();

    // 5. O = P·V over this warp's 128 value dims; P as bf16 hi + lo (16 significant bits), so
    //    V stays bf16 and the product keeps the strict tolerance near zero
    float o[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    const u32 vb = smem_u32(kvs + (((lane >> 3) & 1) * 8 + (lane & 7)) * RS + warp * 128 + (lane >> 4) * 8);
    for (int ks = 0; ks * 16 < n16; ++ks) {
        const float* r0 = sc + g * scs + ks * 16 + 2 * t;
        const float* r1 = sc + (g + 8) * scs + ks * 16 + 2 * t;
        u32 hi[4], lo[4];
        split_bf2(r0[0], r0[1], hi[0], lo[0]);
        split_bf2(r1[0], r1[1], hi[1], lo[1]);
        split_bf2(r0[8], r0[9], hi[2], lo[2]);
        split_bf2(r1[8], r1[9], hi[3], lo[3]);
#pragma unroll
        for (int np = 0; np < 8; ++np) {
            u32 v0, v1, v2, v3;
            ldsm4t(vb + ks * 16 * RS * 2 + np * 32, v0, v1, v2, v3);
            mma_bf16(o[2 * np], hi[0], hi[1], hi[2], hi[3], v0, v1);
            mma_bf16(o[2 * np + 1], hi[0], hi[1], hi[2], hi[3], v2, v3);
            mma_bf16(o[2 * np], lo[0], lo[1], lo[2], lo[3], v0, v1);
            mma_bf16(o[2 * np + 1], lo[0], lo[1], lo[2], lo[3], v2, v3);
        }
    }
    __syncthreads();  // every warp has read V before O overwrites it

    // 6. this block's (m, l, O) for the cluster, O over the K/V buffer
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
        const int d = warp * 128 + nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(os + g * LV + d) = make_float2(o[nt][0], o[nt][1]);
        *reinterpret_cast<float2*>(os + (g + 8) * LV + d) = make_float2(o[nt][2], o[nt][3]);
    }
    cluster_sync();
    const int W = ((LV / 2 + (int)nspl - 1) / (int)nspl) * 2;  // this block's dims: [rank·W, +W)
    const int d0 = (int)rank * W, d1 = min(LV, d0 + W);
    for (int idx = tid; idx < hg * (W / 2); idx += NT) {
        const int h = idx / (W / 2), d = d0 + 2 * (idx % (W / 2));
        if (d >= d1) continue;
        float mr[MAXC], lr[MAXC], M = -CUDART_INF_F;
        float2 orr[MAXC];
#pragma unroll
        for (int s = 0; s < MAXC; ++s) {
            if (s < (int)nspl) {
                mr[s] = ld_cluster(s_m + h, s);
                lr[s] = ld_cluster(s_l + h, s);
                orr[s] = ld_cluster2(os + h * LV + d, s);
            } else {
                mr[s] = -CUDART_INF_F;
                lr[s] = 0.0f;
                orr[s] = make_float2(0.0f, 0.0f);
            }
        }
#pragma unroll
        for (int s = 0; s < MAXC; ++s) M = fmaxf(M, mr[s]);
        const float Mref = M == -CUDART_INF_F ? 0.0f : M;
        float lsum = 0.0f, ox = 0.0f, oy = 0.0f;
#pragma unroll
        for (int s = 0; s < MAXC; ++s) {
            const float w = __expf(mr[s] - Mref);
            lsum = fmaf(lr[s], w, lsum);
            ox = fmaf(orr[s].x, w, ox);
            oy = fmaf(orr[s].y, w, oy);
        }
        const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;  // an empty request writes zeros
        *reinterpret_cast<__nv_bfloat162*>(out + ((long long)i * H + h0 + h) * LV + d) =
            __floats2bfloat162_rn(ox * inv, oy * inv);
    }
    cluster_sync();
}
