/* atrex:plan
[[launch]]
kernel = "fp8_dynamic_per_token_quant_kernel"
grid = ["T"]
block = ["32 * ceil(ceil(H / (8 * VPT)) / 32)"]
args = ["q", "scale", "x", "H:i32"]

[tune]
VPT = [1, 2, 4]
*/
// Baseline dynamic per-token FP8 (e4m3fnuz) quantization: one block per row sized so that each
// thread holds VPT 16-byte vectors (8 bf16) in registers; the row is read once. Row amax by
// warp shuffles + shared memory; scale = max(amax, 1e-12) / 240, inv = __frcp_rn(scale);
// q = fnuz(clamp(x · inv, ±240)) with a software RNE converter (no hardware fnuz conversion on
// NVIDIA); 8 codes stored as one 8-byte word. Scalar path when H % 8 != 0.
#include <cuda_bf16.h>

#ifndef VPT
#define VPT 1
#endif

// fp32 → float8_e4m3fnuz: RNE with subnormals; |x| < 248 saturates to ±240; |x| ≥ 248, inf
// and NaN give 0x80; no negative zero.
__device__ __forceinline__ unsigned int fp8_e4m3fnuz(float x) {
    const float a = fabsf(x);
    if (!(a < 248.0f)) return 0x80u;
    unsigned int code;
    if (a < 0.0078125f) {
        code = (unsigned int)rintf(a * 1024.0f);
    } else {
        const unsigned int b = __float_as_uint(a);
        unsigned int m = (b >> 20) & 7u;
        const unsigned int rest = b & 0xFFFFFu;
        if (rest > 0x80000u || (rest == 0x80000u && (m & 1u))) m += 1u;
        code = (((b >> 23) - 119u) << 3) + m;
    }
    return code == 0u ? 0u : (code | ((__float_as_uint(x) >> 24) & 0x80u));
}

__device__ __forceinline__ unsigned int quant(float v, float inv) {
    return fp8_e4m3fnuz(fminf(fmaxf(__fmul_rn(v, inv), -240.0f), 240.0f));
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float block_max(float v, float* red) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    return warp_max(lane < (int)((blockDim.x + 31) >> 5) ? red[lane] : 0.0f);
}

extern "C" __global__ void __launch_bounds__(1024)
fp8_dynamic_per_token_quant_kernel(unsigned char* __restrict__ q, float* __restrict__ scale,
                                   const __nv_bfloat16* __restrict__ x, int H) {
    __shared__ float red[32];
    const size_t base = blockIdx.x * (size_t)H;
    if ((H & 7) == 0) {
        const int nv = H >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        uint4 p[VPT];
        float m = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nv) {
                p[k] = __ldg(xv + i);
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p[k]);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float2 t = __bfloat1622float2(h[e]);
                    m = fmaxf(m, fmaxf(fabsf(t.x), fabsf(t.y)));
                }
            }
        }
        const float s = __fdiv_rn(fmaxf(block_max(m, red), 1e-12f), 240.0f);
        const float inv = __frcp_rn(s);
        if (threadIdx.x == 0) scale[blockIdx.x] = s;
        uint2* qv = reinterpret_cast<uint2*>(q + base);
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nv) {
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p[k]);
                unsigned int w[2] = {0u, 0u};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float2 t = __bfloat1622float2(h[e]);
                    w[e >> 1] |= (quant(t.x, inv) | (quant(t.y, inv) << 8)) << (16 * (e & 1));
                }
                qv[i] = make_uint2(w[0], w[1]);
            }
        }
    } else {
        const __nv_bfloat16* xr = x + base;
        float m = 0.0f;
        for (int j = threadIdx.x; j < H; j += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(xr[j])));
        const float s = __fdiv_rn(fmaxf(block_max(m, red), 1e-12f), 240.0f);
        const float inv = __frcp_rn(s);
        if (threadIdx.x == 0) scale[blockIdx.x] = s;
        for (int j = threadIdx.x; j < H; j += blockDim.x) q[base + j] = (unsigned char)quant(__bfloat162float(xr[j]), inv);
    }
}
