/* atrex:plan
[[launch]]
kernel = "fused_qk_rmsnorm_kernel"
grid = ["ceil(T * (Hq + 2*Hkv) / (BLOCK / TPR))"]
block = ["BLOCK"]
args = ["out", "hidden_states", "q_weight", "k_weight", "T:i32", "Hq:i32", "Hkv:i32", "D:i32", "eps:f32"]

[tune]
TPR = [16, 8, 32]
BLOCK = [128, 64, 256]
*/
// Baseline per-head QK RMSNorm on packed fp16 QKV: a group of TPR lanes (power of two ≤ 32)
// per (token, head), BLOCK / TPR heads per block. 16-byte loads of 8 fp16 kept in registers
// (up to MAXV per lane, the rest re-read), Σx² accumulated in fp64 (the reference's rule, so
// rstd is bit-identical whatever the order) and reduced with shuffles inside the group;
// rstd = rsqrtf(fp32(Σx² / D) + eps);
// n = fp16(x · rstd), out = fp16(w · n) (the reference's two roundings); v heads are copied
// with 16-byte moves. Scalar path when D % 8 != 0.
#include <cuda_fp16.h>

#ifndef TPR
#define TPR 16
#endif
#define MAXV 4

// The lanes of this thread's group: groups may leave early (v heads, the tail), so the
// shuffles name only their own group.
__device__ __forceinline__ unsigned group_mask() {
    return TPR == 32 ? 0xffffffffu : (((1u << (TPR & 31)) - 1u) << ((threadIdx.x & 31) & ~(TPR - 1)));
}

// Σ of 8 squares: each fp16 square is exact in fp32, the sum is accumulated in fp64.
__device__ __forceinline__ double sumsq8(const uint4& p) {
    const __half2* h = reinterpret_cast<const __half2*>(&p);
    double s = 0.0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float2 t = __half22float2(h[e]);
        s += (double)(t.x * t.x);
        s += (double)(t.y * t.y);
    }
    return s;
}

__device__ __forceinline__ uint4 norm8(const uint4& xp, const uint4& wp, float rstd) {
    const __half2* x2 = reinterpret_cast<const __half2*>(&xp);
    const __half2* w2 = reinterpret_cast<const __half2*>(&wp);
    uint4 r;
    __half2* o2 = reinterpret_cast<__half2*>(&r);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float2 a = __half22float2(x2[e]), w = __half22float2(w2[e]);
        float2 n = __half22float2(__floats2half2_rn(a.x * rstd, a.y * rstd));
        o2[e] = __floats2half2_rn(w.x * n.x, w.y * n.y);
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(1024)
fused_qk_rmsnorm_kernel(__half* __restrict__ out, const __half* __restrict__ hidden_states,
                        const __half* __restrict__ q_weight, const __half* __restrict__ k_weight,
                        int T, int Hq, int Hkv, int D, float eps) {
    const int heads = Hq + 2 * Hkv;
    const int lane = threadIdx.x % TPR;
    const long long item = (long long)blockIdx.x * (blockDim.x / TPR) + threadIdx.x / TPR;
    if (item >= (long long)T * heads) return;  // whole groups leave together
    const int head = (int)(item % heads);
    const size_t base = (size_t)item * D;
    const bool is_v = head >= Hq + Hkv;  // uniform inside the group
    const __half* w = head < Hq ? q_weight : k_weight;
    if ((D & 7) == 0) {
        const int nv = D >> 3;
        const uint4* xv = reinterpret_cast<const uint4*>(hidden_states + base);
        uint4* ov = reinterpret_cast<uint4*>(out + base);
        if (is_v) {
            for (int i = lane; i < nv; i += TPR) ov[i] = __ldg(xv + i);
            return;
        }
        const unsigned mask = group_mask();
        uint4 xp[MAXV];
        double s = 0.0;
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * TPR;
            if (i < nv) {
                xp[k] = __ldg(xv + i);
                s += sumsq8(xp[k]);
            }
        }
        for (int i = lane + MAXV * TPR; i < nv; i += TPR) s += sumsq8(__ldg(xv + i));
#pragma unroll
        for (int o = TPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(mask, s, o);
        const float rstd = rsqrtf(__double2float_rn(s / (double)D) + eps);
        const uint4* wv = reinterpret_cast<const uint4*>(w);
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
            const int i = lane + k * TPR;
            if (i < nv) ov[i] = norm8(xp[k], __ldg(wv + i), rstd);
        }
        for (int i = lane + MAXV * TPR; i < nv; i += TPR) ov[i] = norm8(__ldg(xv + i), __ldg(wv + i), rstd);
    } else {
        const __half* xr = hidden_states + base;
        if (is_v) {
            for (int j = lane; j < D; j += TPR) out[base + j] = xr[j];
            return;
        }
        const unsigned mask = group_mask();
        double s = 0.0;
        for (int j = lane; j < D; j += TPR) {
            const float v = __half2float(xr[j]);
            s += (double)(v * v);
        }
#pragma unroll
        for (int o = TPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(mask, s, o);
        const float rstd = rsqrtf(__double2float_rn(s / (double)D) + eps);
        for (int j = lane; j < D; j += TPR) {
            const __half n = __float2half_rn(__half2float(xr[j]) * rstd);
            out[base + j] = __float2half_rn(__half2float(w[j]) * __half2float(n));
        }
    }
}
