/* atrex:template
id = "tpl-causal-conv1d"
title = "Depthwise causal conv1d + SiLU over the flattened array: 8 elements per thread, 16-byte loads and stores, halo by shuffle"
operator = "causal_conv1d"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["scan-conv"]
bottlenecks = ["memory"]
category = "memory-coalescing"
expected_gain = "one 16-byte load and one 16-byte store per 8 outputs whatever T is (rows need not be aligned: the array is walked flat), the 3-element halo from the previous lane, a straight-line path for the elements whose window stays in one row"
pitfalls = ["tokens before 0 come from initial_state (oldest first)", "fp32 accumulation starts from the bias; bf16 rounding before and after SiLU", "a row boundary can fall inside a thread's 8 elements (T is odd in some shapes, 1 in the decode shapes): keep a slow path that changes channel", "the full-precision expf and fp32 division made the kernel issue-bound (SM 58 %, DRAM 21 %): the fast versions are within an ulp of fp32, far inside a bf16 output", "SiLU through tanh.approx (2^-11 relative) cancels for negative inputs: 1 + tanh(y/2) keeps no correct bit at y = -14, where the output is still 1e-5 (the structured draw `large` fails); use it for y >= 0 only"]
[measured]
s_op = 0.1473
baseline_s_op = 0.0919
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.147, every shape passing at the strict level (docs/measurements/bench-best-causal_conv1d.json).
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 9/9 shapes pass strict on 5 seeds, max |err| 0): S_op 0.170 (0.1695) against the baseline's 0.092 and the one-element-per-thread kernel's 0.094 it replaces; 1.84x the baseline (docs/measurements/bench-best-causal_conv1d.json). Large shapes 0.16 → 0.55-0.63 (121 M elements in 161 µs), the median shape 3 (4096 × 514) 0.094 → 0.17 (10.4 µs). On the way (quick): 16-byte vectors alone 0.147 — the kernel was issue-bound (SM 58 %, DRAM 21 %); fast exp and division, one paired bf16 conversion and the 32-bit division 0.204 → SiLU through tanh.approx 0.214; EPT 16 slower on the mid shapes (fewer threads); a warp-uniform path for warps holding a row boundary slower (0.145: 48 registers, the extra loads). Profile: shape 8 74 % SM / 56 % DRAM (compute-bound still: conversions and the SiLU), shape 3 8 µs under the profiler with 1.3 waves and the slow path of the row-boundary threads diverging.
/* atrex:plan
[[launch]]
kernel = "causal_conv1d_silu_vec"
grid = ["ceil(C * T / (EPT * BLOCK))"]
block = ["BLOCK"]
args = ["out", "x", "weight", "bias", "initial_state", "C:i32", "T:i32", "W:i32"]

[tune]
BLOCK = [128, 256, 512]
EPT = [8, 16]        # consecutive elements per thread (16-byte vectors of 8)
SILU_TANH = [1, 0]   # SiLU through tanh.approx (one MUFU op) instead of exp and a division
*/
// Depthwise causal conv1d + SiLU over the flattened [C, T] array: each thread takes EPT
// consecutive elements (16-byte loads and stores, whatever T is: rows need not be
// aligned), the 3 elements before them from the previous lane (a shuffle; lane 0 loads them),
// and the taps of the element's channel from weight (L1-resident). Elements whose window
// reaches before token 0 read initial_state. SiLU in fp32 with the fast exp and division
// (within an ulp of fp32; the output is bf16).
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef EPT
#define EPT 8
#endif
static_assert(EPT % 8 == 0, "whole 16-byte vectors");

__device__ __forceinline__ float bf(unsigned short u) { return __uint_as_float(((unsigned int)u) << 16); }

#ifndef SILU_TANH
#define SILU_TANH 1
#endif
// SiLU in fp32: y / (1 + e^-y) with the fast exp and division (ex2.approx and rcp: a few fp32
// ulps everywhere), or, with SILU_TANH, y · (1 + tanh(y/2)) / 2 with one tanh.approx for y ≥ 0
// only: tanh.approx's error is 2^-11 relative to tanh, so for y < 0 the sum 1 + tanh cancels and
// the result loses every bit (y = -14: 1 + tanh ≈ 1.7e-6, the error as large as the value).
__device__ __forceinline__ float silu(float y) {
#if SILU_TANH
    if (y >= 0.0f) {
        float th;
        asm("tanh.approx.f32 %0, %1;" : "=f"(th) : "f"(0.5f * y));
        return 0.5f * y * (1.0f + th);
    }
#endif
    return __fdividef(y, 1.0f + __expf(-y));
}

extern "C" __global__ void __launch_bounds__(BLOCK) causal_conv1d_silu_vec(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x,
    const __nv_bfloat16* __restrict__ weight, const __nv_bfloat16* __restrict__ bias,
    const __nv_bfloat16* __restrict__ initial_state, int C, int T, int W) {
    if (W != 4) __trap();
    const long long N = (long long)C * T;
    const long long i0 = ((long long)blockIdx.x * BLOCK + threadIdx.x) * EPT;
    const int lane = threadIdx.x & 31;
    const unsigned short* xs = reinterpret_cast<const unsigned short*>(x);
    const bool full = i0 + EPT <= N;
    // The channel of the first element, and its taps and bias: loads issued together with x's
    // (one memory trip, not two). 32-bit division when the array allows it (a 64-bit one is a
    // long software routine).
    const long long ic = i0 < N ? i0 : N - 1;
    long long c;
    if (N < (1ll << 31)) c = (unsigned int)ic / (unsigned int)T;
    else c = ic / T;
    int t = (int)(i0 - c * T);
    const unsigned short* ws = reinterpret_cast<const unsigned short*>(weight);
    const unsigned short* bs = reinterpret_cast<const unsigned short*>(bias);
    const unsigned short* is = reinterpret_cast<const unsigned short*>(initial_state);
    uint2 wq = __ldg(reinterpret_cast<const uint2*>(ws + c * 4));
    const unsigned short b16 = __ldg(bs + c);
    unsigned short v[EPT + 3];  // v[0..2]: elements i0-3..i0-1; v[3..]: i0..i0+EPT-1
    if (full) {
#pragma unroll
        for (int q = 0; q < EPT / 8; ++q) {
            const uint4 u = __ldg(reinterpret_cast<const uint4*>(xs + i0) + q);
            const unsigned int w4[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                v[3 + 8 * q + 2 * k] = (unsigned short)(w4[k] & 0xFFFFu);
                v[4 + 8 * q + 2 * k] = (unsigned short)(w4[k] >> 16);
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < EPT; ++k) v[3 + k] = i0 + k < N ? xs[i0 + k] : 0;
    }
    // The previous lane's last three elements.
    const unsigned int p01 = __shfl_up_sync(0xffffffffu, (unsigned int)v[EPT] | ((unsigned int)v[EPT + 1] << 16), 1);
    const unsigned int p2 = __shfl_up_sync(0xffffffffu, (unsigned int)v[EPT + 2], 1);
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < 3; ++k) v[k] = i0 - 3 + k >= 0 && i0 - 3 + k < N ? xs[i0 - 3 + k] : 0;
    } else {
        v[0] = (unsigned short)(p01 & 0xFFFFu);
        v[1] = (unsigned short)(p01 >> 16);
        v[2] = (unsigned short)p2;
    }
    if (i0 >= N) return;
    float w0 = bf(wq.x & 0xFFFFu), w1 = bf(wq.x >> 16), w2 = bf(wq.y & 0xFFFFu), w3 = bf(wq.y >> 16);
    float b = bf(b16);
    unsigned short r[EPT];
    if (full && t >= 3 && t + EPT <= T) {
        // The common case: one channel, every tap inside x.
#pragma unroll
        for (int e = 0; e < EPT; e += 2) {
            float a0 = b, a1 = b;
            a0 += w0 * bf(v[e]);
            a0 += w1 * bf(v[e + 1]);
            a0 += w2 * bf(v[e + 2]);
            a0 += w3 * bf(v[e + 3]);
            a1 += w0 * bf(v[e + 1]);
            a1 += w1 * bf(v[e + 2]);
            a1 += w2 * bf(v[e + 3]);
            a1 += w3 * bf(v[e + 4]);
            const float2 y = __bfloat1622float2(__floats2bfloat162_rn(a0, a1));  // one cvt for two
            const __nv_bfloat162 o2 = __floats2bfloat162_rn(silu(y.x), silu(y.y));
            r[e] = __bfloat16_as_ushort(o2.x);
            r[e + 1] = __bfloat16_as_ushort(o2.y);
        }
    } else {
        // A row boundary or a row's first tokens among these elements, or the array's end.
#pragma unroll
        for (int e = 0; e < EPT; ++e) {
            if (i0 + e < N) {
                if (t == T) {  // the next channel starts inside this thread's 8 elements
                    t = 0;
                    ++c;
                    wq = __ldg(reinterpret_cast<const uint2*>(ws + c * 4));
                    w0 = bf(wq.x & 0xFFFFu); w1 = bf(wq.x >> 16); w2 = bf(wq.y & 0xFFFFu); w3 = bf(wq.y >> 16);
                    b = bf(bs[c]);
                }
                // taps j = 0..3 read s[t - 3 + j]: this row's x, or initial_state before token 0
                float s[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int tau = t - 3 + j;
                    s[j] = tau >= 0 ? bf(v[e + j]) : bf(is[c * 3 + tau + 3]);
                }
                float acc = b;
                acc += w0 * s[0];
                acc += w1 * s[1];
                acc += w2 * s[2];
                acc += w3 * s[3];
                const float y = __bfloat162float(__float2bfloat16_rn(acc));
                r[e] = __bfloat16_as_ushort(__float2bfloat16_rn(silu(y)));
                ++t;
            } else {
                r[e] = 0;
            }
        }
    }
    unsigned short* os = reinterpret_cast<unsigned short*>(out);
    if (full) {
#pragma unroll
        for (int q = 0; q < EPT / 8; ++q) {
            uint4 o;
            o.x = r[8 * q + 0] | ((unsigned int)r[8 * q + 1] << 16);
            o.y = r[8 * q + 2] | ((unsigned int)r[8 * q + 3] << 16);
            o.z = r[8 * q + 4] | ((unsigned int)r[8 * q + 5] << 16);
            o.w = r[8 * q + 6] | ((unsigned int)r[8 * q + 7] << 16);
            reinterpret_cast<uint4*>(os + i0)[q] = o;
        }
    } else {
        for (int e = 0; e < EPT; ++e)
            if (i0 + e < N) os[i0 + e] = r[e];
    }
}
