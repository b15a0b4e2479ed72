/* atrex:template
id = "tpl-rms-norm-regcache"
title = "RMSNorm: one block per row, the row cached in registers (one HBM read)"
operator = "rms_norm"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["row-reduction"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: 1.1-1.4x over a two-pass kernel on rows that miss L1"
pitfalls = ["MAXV * 8 * THREADS must cover H or the fallback re-reads the row", "keep (x * inv) * w in this order for bit parity with the reference"]
[measured]
s_op = 0.2156
baseline_s_op = 0.2335
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.216 against the baseline's 0.234;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "rms_norm_regcache"
grid = ["T"]
block = ["min(THREADS, 32 * ceil(max(32, ceil(H / 8)) / 32))"]
args = ["out", "x", "weight", "H:i32", "eps:f32"]

[tune]
THREADS = [256, 128, 512, 1024]
MAXV = [4, 8, 2]
*/
// Each thread keeps up to MAXV 16-byte vectors of its row in registers: the row is read from
// HBM once, reduced (warp shuffles, then one shared-memory step), scaled and stored.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    float t = (threadIdx.x < nw) ? red[threadIdx.x] : 0.0f;
    if (warp == 0) {
        t = warp_sum(t);
        if (lane == 0) red[32] = t;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ uint4 scale8(uint4 p, uint4 q, float inv) {
    uint4 r;
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
    const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&q);
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(h[k]);
        float2 g = __bfloat1622float2(w[k]);
        o[k] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
    }
    return r;
}

extern "C" __global__ void rms_norm_regcache(__nv_bfloat16* __restrict__ out,
                                             const __nv_bfloat16* __restrict__ x,
                                             const __nv_bfloat16* __restrict__ weight, int H,
                                             float eps) {
    __shared__ float red[33];
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    float s = 0.0f;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        uint4 cache[MAXV];
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const int v = threadIdx.x + i * blockDim.x;
            if (v < nv) {
                cache[i] = xv[v];
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&cache[i]);
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    float2 f = __bfloat1622float2(h[k]);
                    s += f.x * f.x + f.y * f.y;
                }
            }
        }
        // Rows longer than MAXV vectors per thread: the rest is streamed twice.
        for (int v = threadIdx.x + MAXV * blockDim.x; v < nv; v += blockDim.x) {
            uint4 p = xv[v];
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
        const float inv = rsqrtf(block_sum(s, red) / (float)H + eps);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(orow);
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const int v = threadIdx.x + i * blockDim.x;
            if (v < nv) ov[v] = scale8(cache[i], wv[v], inv);
        }
        for (int v = threadIdx.x + MAXV * blockDim.x; v < nv; v += blockDim.x)
            ov[v] = scale8(xv[v], wv[v], inv);
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            float v = __bfloat162float(xr[j]);
            s += v * v;
        }
        const float inv = rsqrtf(block_sum(s, red) / (float)H + eps);
        for (int j = threadIdx.x; j < H; j += blockDim.x)
            orow[j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv * __bfloat162float(weight[j]));
    }
}
