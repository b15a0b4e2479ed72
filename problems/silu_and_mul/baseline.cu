/* atrex:plan
[[launch]]
kernel = "silu_and_mul_kernel"
grid = ["T", "ceil(d / (8 * BLOCK))"]
block = ["BLOCK"]
args = ["out", "x", "d:i32"]

[tune]
BLOCK = [128, 256, 64]
*/
// Baseline SwiGLU: one block row per token, 16-byte loads of 8 gate and 8 up values,
// bf16(silu(g)) then bf16(a · u) in fp32, 16-byte stores. Scalar path when d % 8 != 0.
#include <cuda_bf16.h>

__device__ __forceinline__ float silu_rounded(float g) {
    return __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g))));
}

extern "C" __global__ void silu_and_mul_kernel(__nv_bfloat16* __restrict__ out,
                                               const __nv_bfloat16* __restrict__ x, int d) {
    const size_t t = blockIdx.x;
    const __nv_bfloat16* gate = x + t * 2 * (size_t)d;
    const __nv_bfloat16* up = gate + d;
    __nv_bfloat16* o = out + t * (size_t)d;
    if ((d % 8) == 0) {
        const int v = blockIdx.y * blockDim.x + threadIdx.x;
        if (v >= d / 8) return;
        uint4 gp = reinterpret_cast<const uint4*>(gate)[v];
        uint4 upp = reinterpret_cast<const uint4*>(up)[v];
        uint4 r;
        const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gp);
        const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&upp);
        __nv_bfloat162* r2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 g = __bfloat1622float2(g2[k]);
            float2 u = __bfloat1622float2(u2[k]);
            r2[k] = __floats2bfloat162_rn(silu_rounded(g.x) * u.x, silu_rounded(g.y) * u.y);
        }
        reinterpret_cast<uint4*>(o)[v] = r;
    } else {
        for (int j = (blockIdx.y * blockDim.x + threadIdx.x) * 8, k = 0; k < 8 && j + k < d; ++k) {
            o[j + k] = __float2bfloat16_rn(silu_rounded(__bfloat162float(gate[j + k])) * __bfloat162float(up[j + k]));
        }
    }
}
