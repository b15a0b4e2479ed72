/* atrex:plan
[[launch]]
kernel = "rms_norm_rows"
grid = ["if(H <= WARP_MAX_H, ceil(T / ROWS_PER_BLOCK), T)"]
block = ["if(H <= WARP_MAX_H, 32 * ROWS_PER_BLOCK, 32 * ceil(min(1024, max(32, H // 8)) / 32))"]
args = ["out", "x", "weight", "T:i32", "H:i32", "eps:f32", "if(H <= WARP_MAX_H, 1, 0):i32"]

[tune]
ROWS_PER_BLOCK = [8, 4, 16]
WARP_MAX_H = [1024, 512, 2048]

[defines]
ROWS_PER_BLOCK = 4
*/
// Hand edit 3: four rows per block (more blocks in flight for the short-row shapes).
// Hand edit 1 was: the profile of the baseline on 128-wide rows showed one 32-thread block per row,
// half the lanes idle and 19 % achieved occupancy (latency-bound). Rows of at most WARP_MAX_H
// now get one warp each, ROWS_PER_BLOCK rows per block, the row held in registers (one global
// read). Wider rows keep a block per row, also holding their 16-byte vector in registers.
#include <cuda_bf16.h>

#define MAXV (WARP_MAX_H / 256)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float sumsq8(const uint4& p) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(h[k]);
        s += f.x * f.x + f.y * f.y;
    }
    return s;
}

__device__ __forceinline__ uint4 scale8(const uint4& p, const uint4& q, float inv) {
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

extern "C" __global__ void rms_norm_rows(__nv_bfloat16* __restrict__ out,
                                         const __nv_bfloat16* __restrict__ x,
                                         const __nv_bfloat16* __restrict__ weight,
                                         int T, int H, float eps, int warp_per_row) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (warp_per_row && (H % 8) == 0) {
        const int row = blockIdx.x * (blockDim.x / 32) + warp;
        if (row >= T) return;
        const uint4* xv = reinterpret_cast<const uint4*>(x + (size_t)row * H);
        uint4* ov = reinterpret_cast<uint4*>(out + (size_t)row * H);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        const int nv = H / 8;
        uint4 v[MAXV];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + 32 * k;
            if (i < nv) {
                v[k] = xv[i];
                s += sumsq8(v[k]);
            }
        }
        const float inv = rsqrtf(warp_sum(s) / (float)H + eps);
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + 32 * k;
            if (i < nv) ov[i] = scale8(v[k], wv[i], inv);
        }
        return;
    }
    // A block per row.
    __shared__ float warp_partial[32];
    __shared__ float inv_rms;
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    const bool vec = (H % 8) == 0;
    float s = 0.0f;
    uint4 first = make_uint4(0, 0, 0, 0);
    if (vec) {
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            uint4 p = xv[i];
            if (i == (int)threadIdx.x) first = p;
            s += sumsq8(p);
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            float v = __bfloat162float(xr[j]);
            s += v * v;
        }
    }
    s = warp_sum(s);
    if (lane == 0) warp_partial[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float t = lane < (int)(blockDim.x / 32) ? warp_partial[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) inv_rms = rsqrtf(t / (float)H + eps);
    }
    __syncthreads();
    const float inv = inv_rms;
    if (vec) {
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(orow);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            ov[i] = scale8(i == (int)threadIdx.x ? first : xv[i], wv[i], inv);
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            orow[j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv * __bfloat162float(weight[j]));
        }
    }
}
