/* atrex:plan
[[launch]]
kernel = "gated_rms_norm_kernel"
grid = ["ceil(R / (BLOCK / TPR))"]
block = ["BLOCK"]
args = ["out", "x", "weight", "z", "R:i32", "H:i32", "eps:f32"]

[tune]
TPR = [16, 8, 32]
BLOCK = [256, 128, 512]
*/
// Baseline gated RMSNorm for short rows (H = 128): a group of TPR lanes per row (a power of
// two ≤ 32), BLOCK / TPR rows per block. Each lane loads 16-byte vectors (8 bf16) of x and z,
// keeping up to MAXV of each in registers; Σx² is reduced with shuffles inside the group;
// out = bf16(((x · rstd) · w) · silu(z)); 16-byte stores. Rows longer than TPR·MAXV vectors
// re-read the rest; H % 8 != 0 takes a scalar path.
#include <cuda_bf16.h>

#ifndef TPR
#define TPR 16
#endif
#define MAXV 4

__device__ __forceinline__ float silu(float z) { return z / (1.0f + expf(-z)); }

__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float sumsq8(const uint4& p) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float2 t = __bfloat1622float2(h[e]);
        s += t.x * t.x + t.y * t.y;
    }
    return s;
}

__device__ __forceinline__ uint4 gate8(const uint4& xp, const uint4& zp, const uint4& wp,
                                       float rstd) {
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&xp);
    const __nv_bfloat162* z2 = reinterpret_cast<const __nv_bfloat162*>(&zp);
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wp);
    uint4 r;
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float2 a = __bfloat1622float2(x2[e]), g = __bfloat1622float2(z2[e]),
               w = __bfloat1622float2(w2[e]);
        o2[e] = __floats2bfloat162_rn(((a.x * rstd) * w.x) * silu(g.x),
                                      ((a.y * rstd) * w.y) * silu(g.y));
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(1024)
gated_rms_norm_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x,
                      const __nv_bfloat16* __restrict__ weight,
                      const __nv_bfloat16* __restrict__ z, int R, int H, float eps) {
    const int lane = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (blockDim.x / TPR) + threadIdx.x / TPR;
    const bool valid = row < R;  // whole groups are (in)valid; all lanes join the shuffles
    const size_t base = (size_t)(valid ? row : 0) * (size_t)H;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        const uint4* zv = reinterpret_cast<const uint4*>(z + base);
        uint4 xp[MAXV];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * TPR;
            if (valid && i < nv) {
                xp[k] = __ldg(xv + i);
                s += sumsq8(xp[k]);
            }
        }
        for (int i = lane + MAXV * TPR; valid && i < nv; i += TPR) s += sumsq8(__ldg(xv + i));
        const float rstd = rsqrtf(group_sum(s) / (float)H + eps);
        if (!valid) return;
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(out + base);
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * TPR;
            if (i < nv) ov[i] = gate8(xp[k], __ldg(zv + i), __ldg(wv + i), rstd);
        }
        for (int i = lane + MAXV * TPR; i < nv; i += TPR)
            ov[i] = gate8(__ldg(xv + i), __ldg(zv + i), __ldg(wv + i), rstd);
    } else {
        float s = 0.0f;
        for (int j = lane; valid && j < H; j += TPR) {
            const float v = __bfloat162float(x[base + j]);
            s += v * v;
        }
        const float rstd = rsqrtf(group_sum(s) / (float)H + eps);
        if (!valid) return;
        for (int j = lane; j < H; j += TPR) {
            const float y = ((__bfloat162float(x[base + j]) * rstd) * __bfloat162float(weight[j])) *
                            silu(__bfloat162float(z[base + j]));
            out[base + j] = __float2bfloat16_rn(y);
        }
    }
}
