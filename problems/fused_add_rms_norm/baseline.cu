/* atrex:plan
[[launch]]
kernel = "fused_add_rms_norm_kernel"
grid = ["T"]
block = ["32 * ceil(min(MAX_THREADS, max(32, H // 8)) / 32)"]
args = ["out", "residual_out", "x", "residual", "weight", "H:i32", "eps:f32"]

[tune]
MAX_THREADS = [1024, 512, 256]
*/
// Baseline fused add + RMSNorm: one block per row; 16-byte loads; r = bf16(x + residual) is
// stored and kept for the sum of squares; the second pass re-reads the thread's own r.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void fused_add_rms_norm_kernel(__nv_bfloat16* __restrict__ out,
                                                     __nv_bfloat16* __restrict__ residual_out,
                                                     const __nv_bfloat16* __restrict__ x,
                                                     const __nv_bfloat16* __restrict__ residual,
                                                     const __nv_bfloat16* __restrict__ weight,
                                                     int H, float eps) {
    __shared__ float warp_partial[32];
    __shared__ float inv_rms;
    const size_t base = blockIdx.x * (size_t)H;
    const bool vec = (H % 8) == 0;
    float s = 0.0f;
    if (vec) {
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        const uint4* rv = reinterpret_cast<const uint4*>(residual + base);
        uint4* ov = reinterpret_cast<uint4*>(residual_out + base);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            uint4 a = xv[i], b = rv[i], c;
            const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
            const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
            __nv_bfloat162* c2 = reinterpret_cast<__nv_bfloat162*>(&c);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 fa = __bfloat1622float2(a2[k]);
                float2 fb = __bfloat1622float2(b2[k]);
                c2[k] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
                float2 r = __bfloat1622float2(c2[k]);
                s += r.x * r.x + r.y * r.y;
            }
            ov[i] = c;
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            __nv_bfloat16 r = __float2bfloat16_rn(__bfloat162float(x[base + j]) + __bfloat162float(residual[base + j]));
            residual_out[base + j] = r;
            float rf = __bfloat162float(r);
            s += rf * rf;
        }
    }
    s = warp_sum(s);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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
        const uint4* rv = reinterpret_cast<const uint4*>(residual_out + base);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(out + base);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            uint4 p = rv[i], q = wv[i], r;
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
            const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&q);
            __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                float2 g = __bfloat1622float2(w[k]);
                o[k] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
            }
            ov[i] = r;
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            out[base + j] = __float2bfloat16_rn(__bfloat162float(residual_out[base + j]) * inv * __bfloat162float(weight[j]));
        }
    }
}
