/* atrex:template
id = "tpl-fused-add-rms-norm-regcache"
title = "Fused add + RMSNorm: residual sum kept in registers, one read of x and residual"
operator = "fused_add_rms_norm"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["row-reduction"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: 1.1-1.3x over re-reading residual_out for the scaling pass"
pitfalls = ["r = bf16(x + residual) must be rounded before the sum of squares", "residual_out is compared bit for bit"]
[measured]
s_op = 0.4335
baseline_s_op = 0.4817
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.433 against the baseline's 0.482;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "fused_add_rms_norm_regcache"
grid = ["T"]
block = ["min(THREADS, 32 * ceil(max(32, ceil(H / 8)) / 32))"]
args = ["out", "residual_out", "x", "residual", "weight", "H:i32", "eps:f32"]

[tune]
THREADS = [256, 128, 512, 1024]
MAXV = [4, 8, 2]
*/
// r = bf16(x + residual) is stored to residual_out and kept in registers (up to MAXV 16-byte
// vectors per thread) for the sum of squares and the scaling pass.
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

// r = bf16(a + b) for 8 values; adds their squares to s.
__device__ __forceinline__ uint4 add8(uint4 a, uint4 b, float& s) {
    uint4 r;
    const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(&a);
    const __nv_bfloat162* y = reinterpret_cast<const __nv_bfloat162*>(&b);
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(x[k]);
        float2 g = __bfloat1622float2(y[k]);
        o[k] = __floats2bfloat162_rn(f.x + g.x, f.y + g.y);
        float2 rf = __bfloat1622float2(o[k]);
        s += rf.x * rf.x + rf.y * rf.y;
    }
    return r;
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

extern "C" __global__ void fused_add_rms_norm_regcache(
    __nv_bfloat16* __restrict__ out, __nv_bfloat16* __restrict__ residual_out,
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
    const __nv_bfloat16* __restrict__ weight, int H, float eps) {
    __shared__ float red[33];
    const size_t base = (size_t)blockIdx.x * H;
    float s = 0.0f;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        const uint4* rv = reinterpret_cast<const uint4*>(residual + base);
        uint4* rov = reinterpret_cast<uint4*>(residual_out + base);
        uint4 cache[MAXV];
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const int v = threadIdx.x + i * blockDim.x;
            if (v < nv) {
                cache[i] = add8(xv[v], rv[v], s);
                rov[v] = cache[i];
            }
        }
        for (int v = threadIdx.x + MAXV * blockDim.x; v < nv; v += blockDim.x) rov[v] = add8(xv[v], rv[v], s);
        const float inv = rsqrtf(block_sum(s, red) / (float)H + eps);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(out + base);
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const int v = threadIdx.x + i * blockDim.x;
            if (v < nv) ov[v] = scale8(cache[i], wv[v], inv);
        }
        // Each thread re-reads only what it wrote itself: no barrier needed.
        for (int v = threadIdx.x + MAXV * blockDim.x; v < nv; v += blockDim.x) ov[v] = scale8(rov[v], wv[v], inv);
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            __nv_bfloat16 r = __float2bfloat16_rn(__bfloat162float(x[base + j]) + __bfloat162float(residual[base + j]));
            residual_out[base + j] = r;
            float rf = __bfloat162float(r);
            s += rf * rf;
        }
        const float inv = rsqrtf(block_sum(s, red) / (float)H + eps);
        for (int j = threadIdx.x; j < H; j += blockDim.x)
            out[base + j] = __float2bfloat16_rn(__bfloat162float(residual_out[base + j]) * inv * __bfloat162float(weight[j]));
    }
}
