/* atrex:plan
[[launch]]
kernel = "mla_decode_kernel"
grid = ["ceil(H / HG)", "B"]
block = [256]
smem = "4 * (HG * Dqk + HG * S) + 2 * KT * Dqk"
args = ["out", "q", "kv_cache", "seq_lens", "H:i32", "L:i32", "Dqk:i32", "S:i32"]

[tune]
HG = [16, 8]
KT = [32, 16]
*/
// Baseline mla_decode_attention: one block per (request, group of HG query heads), so each
// latent KV row is read once per HG heads (all heads share the single latent KV head).
//  1. Scores: the request's packed rows stream through shared memory in tiles of KT rows
//     (16-byte loads); a warp per row dots it (bf16 pairs) with the HG queries held as fp32 in
//     shared memory, shuffle-reduced: score = q·k / sqrt(Dqk).
//  2. Softmax per head, one warp per head, fp32 (probabilities stay fp32: the strict tolerance
//     has atol 1e-4, and the op is memory/latency bound).
//  3. P·V: a thread per pair of latent dims accumulates Σ_p prob·V_p for all HG heads, reading
//     the value rows (first L dims) with coalesced 4-byte loads.
#include <cuda_bf16.h>
#include <math_constants.h>

#ifndef HG
#define HG 16
#endif
#ifndef KT
#define KT 32
#endif

extern "C" __global__ void __launch_bounds__(256)
mla_decode_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
                  const __nv_bfloat16* __restrict__ kv_cache, const int* __restrict__ seq_lens, int H, int L,
                  int Dqk, int S) {
    extern __shared__ __align__(16) float sm[];
    float* qs = sm;                 // [HG][Dqk]
    float* sc = qs + HG * Dqk;      // [HG][S]
    __nv_bfloat16* kvs = reinterpret_cast<__nv_bfloat16*>(sc + HG * S);  // [KT][Dqk]
    const int i = blockIdx.y, h0 = blockIdx.x * HG, tid = threadIdx.x, nt = blockDim.x;
    const int hg = min(HG, H - h0);
    long long off = 0;
    for (int j = 0; j < i; ++j) off += seq_lens[j];
    const int len = seq_lens[i];
    if (len <= 0) {
        for (int idx = tid; idx < hg * L; idx += nt)
            out[((long long)i * H + h0) * L + idx] = __float2bfloat16_rn(0.0f);
        return;
    }
    if (len > S) __trap();
    const float scale = 1.0f / sqrtf((float)Dqk);
    for (int idx = tid; idx < HG * Dqk; idx += nt) {
        const int hh = idx / Dqk;
        qs[idx] = hh < hg ? __bfloat162float(q[((long long)i * H + h0) * Dqk + idx]) : 0.0f;
    }
    const __nv_bfloat16* rows = kv_cache + off * Dqk;
    const int warp = tid / 32, lane = tid % 32, warps = nt / 32;
    const int v16 = Dqk / 8;  // 16-byte vectors per row

    // 1. scores
    for (int t0 = 0; t0 < len; t0 += KT) {
        __syncthreads();
        const int nrow = min(KT, len - t0);
        for (int idx = tid; idx < nrow * v16; idx += nt)
            reinterpret_cast<uint4*>(kvs)[idx] = reinterpret_cast<const uint4*>(rows + (long long)t0 * Dqk)[idx];
        __syncthreads();
        for (int r = warp; r < nrow; r += warps) {
            float dot[HG];
#pragma unroll
            for (int hh = 0; hh < HG; ++hh) dot[hh] = 0.0f;
            const __nv_bfloat162* kr = reinterpret_cast<const __nv_bfloat162*>(kvs + r * Dqk);
            for (int d2 = lane; d2 < Dqk / 2; d2 += 32) {
                const float2 k = __bfloat1622float2(kr[d2]);
#pragma unroll
                for (int hh = 0; hh < HG; ++hh) {
                    const float2 qq = reinterpret_cast<const float2*>(qs + hh * Dqk)[d2];
                    dot[hh] = fmaf(qq.x, k.x, fmaf(qq.y, k.y, dot[hh]));
                }
            }
#pragma unroll
            for (int hh = 0; hh < HG; ++hh) {
                for (int w = 16; w > 0; w >>= 1) dot[hh] += __shfl_xor_sync(0xffffffffu, dot[hh], w);
            }
            if (lane == 0) {
#pragma unroll
                for (int hh = 0; hh < HG; ++hh) sc[hh * S + t0 + r] = dot[hh] * scale;
            }
        }
    }
    __syncthreads();

    // 2. softmax per head
    for (int hh = warp; hh < hg; hh += warps) {
        float* row = sc + hh * S;
        float mx = -CUDART_INF_F;
        for (int p = lane; p < len; p += 32) mx = fmaxf(mx, row[p]);
        for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
        float sum = 0.0f;
        for (int p = lane; p < len; p += 32) {
            const float e = __expf(row[p] - mx);
            row[p] = e;
            sum += e;
        }
        for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
        const float inv = 1.0f / sum;
        for (int p = lane; p < len; p += 32) row[p] *= inv;
    }
    __syncthreads();

    // 3. P·V over the latent dims
    for (int dp = tid; dp < L / 2; dp += nt) {
        float ax[HG], ay[HG];
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) ax[hh] = ay[hh] = 0.0f;
        for (int p = 0; p < len; ++p) {
            const float2 v = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(rows + (long long)p * Dqk)[dp]);
#pragma unroll
            for (int hh = 0; hh < HG; ++hh) {
                const float pr = sc[hh * S + p];
                ax[hh] = fmaf(pr, v.x, ax[hh]);
                ay[hh] = fmaf(pr, v.y, ay[hh]);
            }
        }
#pragma unroll
        for (int hh = 0; hh < HG; ++hh) {
            if (hh < hg)
                reinterpret_cast<__nv_bfloat162*>(out + ((long long)i * H + h0 + hh) * L)[dp] =
                    __floats2bfloat162_rn(ax[hh], ay[hh]);
        }
    }
}
