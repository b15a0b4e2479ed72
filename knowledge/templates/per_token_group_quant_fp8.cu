/* atrex:template
id = "tpl-per-token-group-quant-fp8"
title = "Per-group FP8 quantization: one warp per 128-wide group, amax by shuffles"
operator = "per_token_group_quant_fp8"
architectures = ["hopper", "blackwell", "ada"]
families = ["quantization"]
bottlenecks = ["memory"]
category = "parallelism"
expected_gain = "near the bandwidth roofline on the multi-million-row shapes"
pitfalls = ["true division x / scale (not x * (1/scale)) for identical e4m3 codes", "64-bit indexing: up to 6.3e9 elements", "scale = max(amax / 448, 1e-10) bit for bit"]
[measured]
s_op = 0.5127
baseline_s_op = 0.3907
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.513, every shape passing at the strict level (docs/measurements/bench-best-per_token_group_quant_fp8.json).
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 19/19 shapes pass strict on 5 seeds): S_op 0.506 against the baseline's 0.391; 1.29x the baseline (docs/measurements/bench-best-per_token_group_quant_fp8.json).
/* atrex:plan
[[launch]]
kernel = "group_quant_fp8"
grid = ["ceil(T * (H // G) / WARPS)"]
block = ["32 * WARPS"]
args = ["quantized", "scales", "x", "T * (H // G):i64", "G:i32"]

[tune]
WARPS = [8, 4, 16]
*/
// Group g covers x[g·G, (g+1)·G) of the flattened input (groups never straddle rows since
// H % G == 0), so the scale index is g itself. Lanes own 4 consecutive values when G == 128.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ unsigned char to_e4m3(float v) {
    return (unsigned char)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

extern "C" __global__ void group_quant_fp8(unsigned char* __restrict__ quantized,
                                           float* __restrict__ scales,
                                           const __nv_bfloat16* __restrict__ x,
                                           long long groups, int G) {
    const int lane = threadIdx.x & 31;
    const long long g = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (g >= groups) return;
    const __nv_bfloat16* xg = x + g * G;
    unsigned char* qg = quantized + g * G;
    if (G == 128) {
        uint2 p = __ldg(reinterpret_cast<const uint2*>(xg) + lane);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
        float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
        float m = fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y)));
        m = warp_max(m);
        const float scale = fmaxf(m / 448.0f, 1e-10f);
        uchar4 q;
        q.x = to_e4m3(a.x / scale);
        q.y = to_e4m3(a.y / scale);
        q.z = to_e4m3(b.x / scale);
        q.w = to_e4m3(b.y / scale);
        reinterpret_cast<uchar4*>(qg)[lane] = q;
        if (lane == 0) scales[g] = scale;
    } else {
        float m = 0.0f;
        for (int j = lane; j < G; j += 32) m = fmaxf(m, fabsf(__bfloat162float(xg[j])));
        m = warp_max(m);
        const float scale = fmaxf(m / 448.0f, 1e-10f);
        for (int j = lane; j < G; j += 32) qg[j] = to_e4m3(__bfloat162float(xg[j]) / scale);
        if (lane == 0) scales[g] = scale;
    }
}
