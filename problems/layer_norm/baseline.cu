/* atrex:plan
[[launch]]
kernel = "layer_norm_kernel"
grid = ["rows"]
block = ["32 * ceil(ceil(C / (8 * VPT)) / 32)"]
args = ["out", "x", "weight", "bias", "C:i32", "eps:f32"]

[tune]
VPT = [1, 2, 4]
*/
// Baseline LayerNorm: one block per row sized so that each thread holds VPT 16-byte vectors
// (8 bf16) of the row in registers; the row is read once. Mean, then Σ(x − μ)² from the
// registers (two-pass, numerically stable), warp-shuffle + shared-memory block sums,
// rstd = rsqrtf(var + eps), 16-byte stores. Scalar path (re-reading the row) when C % 8 != 0.
#include <cuda_bf16.h>

#ifndef VPT
#define VPT 1
#endif

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block; every thread gets the same total (same order in every warp).
__device__ __forceinline__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    __syncthreads();  // red may still be read from a previous call
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    return warp_sum(lane < (int)((blockDim.x + 31) >> 5) ? red[lane] : 0.0f);
}

extern "C" __global__ void __launch_bounds__(1024)
layer_norm_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x,
                  const __nv_bfloat16* __restrict__ weight, const __nv_bfloat16* __restrict__ bias,
                  int C, float eps) {
    __shared__ float red[32];
    const size_t base = blockIdx.x * (size_t)C;
    const float inv_c = 1.0f / (float)C;
    if ((C & 7) == 0) {
        const int nv = C >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        float f[VPT][8];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nv) {
                uint4 p = __ldg(xv + i);
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float2 t = __bfloat1622float2(h[e]);
                    f[k][2 * e] = t.x;
                    f[k][2 * e + 1] = t.y;
                    s += t.x + t.y;
                }
            }
        }
        const float mean = block_sum(s, red) * inv_c;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            if (threadIdx.x + k * blockDim.x < nv) {
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float d = f[k][e] - mean;
                    q += d * d;
                }
            }
        }
        const float rstd = rsqrtf(block_sum(q, red) * inv_c + eps);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        const uint4* bv = reinterpret_cast<const uint4*>(bias);
        uint4* ov = reinterpret_cast<uint4*>(out + base);
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nv) {
                uint4 wp = __ldg(wv + i), bp = __ldg(bv + i), r;
                const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wp);
                const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bp);
                __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float2 w = __bfloat1622float2(w2[e]), b = __bfloat1622float2(b2[e]);
                    o2[e] = __floats2bfloat162_rn((f[k][2 * e] - mean) * rstd * w.x + b.x,
                                                  (f[k][2 * e + 1] - mean) * rstd * w.y + b.y);
                }
                ov[i] = r;
            }
        }
    } else {
        const __nv_bfloat16* xr = x + base;
        float s = 0.0f;
        for (int j = threadIdx.x; j < C; j += blockDim.x) s += __bfloat162float(xr[j]);
        const float mean = block_sum(s, red) * inv_c;
        float q = 0.0f;
        for (int j = threadIdx.x; j < C; j += blockDim.x) {
            const float d = __bfloat162float(xr[j]) - mean;
            q += d * d;
        }
        const float rstd = rsqrtf(block_sum(q, red) * inv_c + eps);
        for (int j = threadIdx.x; j < C; j += blockDim.x) {
            out[base + j] = __float2bfloat16_rn((__bfloat162float(xr[j]) - mean) * rstd *
                                                    __bfloat162float(weight[j]) +
                                                __bfloat162float(bias[j]));
        }
    }
}
