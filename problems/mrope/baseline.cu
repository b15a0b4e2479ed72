/* atrex:plan
[[launch]]
kernel = "mrope_kernel"
grid = ["ceil(T / TOKENS)"]
block = ["BLOCK"]
smem = "2 * 4 * TOKENS * half"
args = ["q_out", "k_out", "q", "k", "cos", "sin", "T:i32", "Hq:i32", "Hk:i32", "D:i32", "R:i32",
        "mrope_section[0]:i32", "mrope_section[1]:i32", "mrope_section[2]:i32",
        "mrope_interleaved:i32", "is_neox_style:i32"]

[tune]
TOKENS = [2, 1, 4, 8]
BLOCK = [256, 128, 512]
*/
// Baseline mrope: one block per TOKENS tokens. The block first stages each token's selected
// cos/sin row (c[f] = cos[a(f), t, f], s[f] likewise; half = R/2 floats each) in shared memory,
// then every thread rotates 8 frequencies of one head of q or k: two 16-byte loads (x[f0..f0+8)
// and x[half+f0..]), fp32 rotation with separately rounded products and sums (bit-exact with the
// reference), two 16-byte stores. Dims >= R are copied. Scalar path for GPT-J style or when
// half or D is not a multiple of 8.
#include <cuda_bf16.h>

#ifndef TOKENS
#define TOKENS 2
#endif

__device__ __forceinline__ void rot(float x1, float x2, float c, float s, __nv_bfloat16& y1,
                                    __nv_bfloat16& y2) {
    y1 = __float2bfloat16_rn(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
    y2 = __float2bfloat16_rn(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
}

extern "C" __global__ void mrope_kernel(__nv_bfloat16* __restrict__ q_out,
                                        __nv_bfloat16* __restrict__ k_out,
                                        const __nv_bfloat16* __restrict__ q,
                                        const __nv_bfloat16* __restrict__ k,
                                        const float* __restrict__ cos, const float* __restrict__ sin,
                                        int T, int Hq, int Hk, int D, int R, int s0, int s1, int s2,
                                        int interleaved, int neox) {
    extern __shared__ float smem[];
    const int half = R / 2;
    float* cs = smem;                  // [TOKENS][half]
    float* sn = smem + TOKENS * half;  // [TOKENS][half]
    const int t0 = blockIdx.x * TOKENS;
    const int nt = min(TOKENS, T - t0);
    for (int i = threadIdx.x; i < nt * half; i += blockDim.x) {
        const int tt = i / half, f = i % half;
        int axis;
        if (interleaved) {
            axis = (f % 3 == 1 && f <= 3 * s1) ? 1 : (f % 3 == 2 && f <= 3 * s2) ? 2 : 0;
        } else {
            axis = f < s0 ? 0 : (f < s0 + s1 ? 1 : 2);
        }
        const size_t src = ((size_t)axis * T + t0 + tt) * half + f;
        cs[i] = cos[src];
        sn[i] = sin[src];
    }
    __syncthreads();
    const int H = Hq + Hk;
    const bool vec = neox && (half % 8) == 0 && (D % 8) == 0;
    if (vec) {
        const int chunks = half / 8;
        for (int task = threadIdx.x; task < nt * H * chunks; task += blockDim.x) {
            const int j = task % chunks;
            const int h = (task / chunks) % H;
            const int tt = task / (chunks * H);
            const int t = t0 + tt;
            const __nv_bfloat16* xr;
            __nv_bfloat16* yr;
            if (h < Hq) {
                xr = q + ((size_t)t * Hq + h) * D;
                yr = q_out + ((size_t)t * Hq + h) * D;
            } else {
                xr = k + ((size_t)t * Hk + (h - Hq)) * D;
                yr = k_out + ((size_t)t * Hk + (h - Hq)) * D;
            }
            const int f0 = j * 8;
            uint4 a = *reinterpret_cast<const uint4*>(xr + f0);
            uint4 b = *reinterpret_cast<const uint4*>(xr + half + f0);
            const __nv_bfloat16* a8 = reinterpret_cast<const __nv_bfloat16*>(&a);
            const __nv_bfloat16* b8 = reinterpret_cast<const __nv_bfloat16*>(&b);
            uint4 ya, yb;
            __nv_bfloat16* ya8 = reinterpret_cast<__nv_bfloat16*>(&ya);
            __nv_bfloat16* yb8 = reinterpret_cast<__nv_bfloat16*>(&yb);
            const float* c = cs + tt * half + f0;
            const float* s = sn + tt * half + f0;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                rot(__bfloat162float(a8[e]), __bfloat162float(b8[e]), c[e], s[e], ya8[e], yb8[e]);
            }
            *reinterpret_cast<uint4*>(yr + f0) = ya;
            *reinterpret_cast<uint4*>(yr + half + f0) = yb;
        }
    } else {
        for (int task = threadIdx.x; task < nt * H * half; task += blockDim.x) {
            const int f = task % half;
            const int h = (task / half) % H;
            const int tt = task / (half * H);
            const int t = t0 + tt;
            const __nv_bfloat16* xr;
            __nv_bfloat16* yr;
            if (h < Hq) {
                xr = q + ((size_t)t * Hq + h) * D;
                yr = q_out + ((size_t)t * Hq + h) * D;
            } else {
                xr = k + ((size_t)t * Hk + (h - Hq)) * D;
                yr = k_out + ((size_t)t * Hk + (h - Hq)) * D;
            }
            const int i1 = neox ? f : 2 * f, i2 = neox ? f + half : 2 * f + 1;
            rot(__bfloat162float(xr[i1]), __bfloat162float(xr[i2]), cs[tt * half + f],
                sn[tt * half + f], yr[i1], yr[i2]);
        }
    }
    // Pass-through dims R..D-1 (none in the suite's shapes).
    const int rest = D - R;
    for (int task = threadIdx.x; task < nt * H * rest; task += blockDim.x) {
        const int e = R + task % rest;
        const int h = (task / rest) % H;
        const int t = t0 + task / (rest * H);
        if (h < Hq) {
            q_out[((size_t)t * Hq + h) * D + e] = q[((size_t)t * Hq + h) * D + e];
        } else {
            k_out[((size_t)t * Hk + (h - Hq)) * D + e] = k[((size_t)t * Hk + (h - Hq)) * D + e];
        }
    }
}
