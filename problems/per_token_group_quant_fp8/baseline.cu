/* atrex:plan
[[launch]]
kernel = "per_token_group_quant_fp8_kernel"
grid = ["ceil(T * H / G / (BLOCK / LPG))"]
block = ["BLOCK"]
args = ["quantized", "scales", "x", "T * H / G:i64", "G:i32"]

[tune]
BLOCK = [256, 128, 512]
LPG = [16, 8, 32]
*/
// Baseline per-token-group FP8 (e4m3fn) quantization: LPG lanes (power of two ≤ 32) per 1×G
// group, BLOCK / LPG groups per block. Each lane loads 16-byte vectors (8 bf16; one for
// G = 128, LPG = 16), group amax by shuffles inside the lane group; s = max(amax / 448, 1e-10);
// q = e4m3fn(clamp(x / s, ±448)) by true division and the hardware conversion
// (cvt.rn.satfinite.e4m3x2, which matches PyTorch once inputs are clamped); 8 codes per 8-byte
// store, coalesced. Up to MAXV vectors per lane stay in registers, the rest are re-read.
// 64-bit offsets. Scalar path when G % 8 != 0.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#ifndef LPG
#define LPG 16
#endif
#define MAXV 4

__device__ __forceinline__ float amax8(const uint4& p) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
    float m = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float2 t = __bfloat1622float2(h[e]);
        m = fmaxf(m, fmaxf(fabsf(t.x), fabsf(t.y)));
    }
    return m;
}

__device__ __forceinline__ float q1(float v, float s) {
    return fminf(fmaxf(__fdiv_rn(v, s), -448.0f), 448.0f);
}

__device__ __forceinline__ uint2 quant8(const uint4& p, float s) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
    unsigned int w[2];
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
        float2 a = __bfloat1622float2(h[e]), b = __bfloat1622float2(h[e + 1]);
        const unsigned int lo = __nv_cvt_float2_to_fp8x2(make_float2(q1(a.x, s), q1(a.y, s)), __NV_SATFINITE, __NV_E4M3);
        const unsigned int hi = __nv_cvt_float2_to_fp8x2(make_float2(q1(b.x, s), q1(b.y, s)), __NV_SATFINITE, __NV_E4M3);
        w[e >> 1] = lo | (hi << 16);
    }
    return make_uint2(w[0], w[1]);
}

extern "C" __global__ void __launch_bounds__(1024)
per_token_group_quant_fp8_kernel(unsigned char* __restrict__ quantized, float* __restrict__ scales,
                                 const __nv_bfloat16* __restrict__ x, long long groups, int G) {
    const int lane = threadIdx.x % LPG;
    const long long group = (long long)blockIdx.x * (blockDim.x / LPG) + threadIdx.x / LPG;
    const bool valid = group < groups;  // whole lane groups are (in)valid; all join the shuffles
    const size_t base = (size_t)(valid ? group : 0) * (size_t)G;
    if ((G & 7) == 0) {
        const int nv = G >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(x + base);
        uint4 p[MAXV];
        float m = 0.0f;
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * LPG;
            if (valid && i < nv) {
                p[k] = __ldg(xv + i);
                m = fmaxf(m, amax8(p[k]));
            }
        }
        for (int i = lane + MAXV * LPG; valid && i < nv; i += LPG) m = fmaxf(m, amax8(__ldg(xv + i)));
#pragma unroll
        for (int o = LPG / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (!valid) return;
        const float s = fmaxf(__fdiv_rn(m, 448.0f), 1e-10f);
        if (lane == 0) scales[group] = s;
        uint2* qv = reinterpret_cast<uint2*>(quantized + base);
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * LPG;
            if (i < nv) qv[i] = quant8(p[k], s);
        }
        for (int i = lane + MAXV * LPG; i < nv; i += LPG) qv[i] = quant8(__ldg(xv + i), s);
    } else {
        float m = 0.0f;
        for (int j = lane; valid && j < G; j += LPG) m = fmaxf(m, fabsf(__bfloat162float(x[base + j])));
#pragma unroll
        for (int o = LPG / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (!valid) return;
        const float s = fmaxf(__fdiv_rn(m, 448.0f), 1e-10f);
        if (lane == 0) scales[group] = s;
        for (int j = lane; j < G; j += LPG)
            quantized[base + j] = (unsigned char)__nv_cvt_float_to_fp8(q1(__bfloat162float(x[base + j]), s), __NV_SATFINITE, __NV_E4M3);
    }
}
