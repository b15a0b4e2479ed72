/* atrex:plan
[[launch]]
kernel = "causal_conv1d_kernel"
grid = ["max(1, min(ceil(C * T / (8 * BLOCK)), 132 * 32))"]
block = ["BLOCK"]
args = ["out", "x", "weight", "bias", "initial_state", "C:i32", "T:i32", "W:i32"]

[tune]
BLOCK = [256, 128, 512]
*/
// Baseline causal_conv1d (x, out [C, T], token axis contiguous). The [C, T] tensor is treated as
// one flat array: each thread takes 8 consecutive elements (one 16-byte load and store, for any
// T), grid-stride. For width 4, when the 8 elements lie in one channel and start at t >= 3, the
// three preceding inputs come from x itself (3 scalar loads, L1 hits); otherwise each tap is
// taken from x or initial_state as the sequence s_c = (initial_state[c], x[c]) requires.
// fp32 from the bias in tap order with separately rounded products and sums, bf16(y),
// bf16(silu(y)) — the reference's arithmetic. Other widths use a scalar per-element path.
#include <cuda_bf16.h>

__device__ __forceinline__ float bf(const __nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ __nv_bfloat16 finish(float acc) {
    const float y = __bfloat162float(__float2bfloat16_rn(acc));
    return __float2bfloat16_rn(y / (1.0f + expf(-y)));
}

// s_c[m] for channel c: the initial state for m < W-1, else x[c, m - (W-1)].
__device__ __forceinline__ float tap(const __nv_bfloat16* x, const __nv_bfloat16* init, long long c,
                                     int T, int W, int m) {
    return m < W - 1 ? bf(init[c * (W - 1) + m]) : bf(x[c * (long long)T + (m - (W - 1))]);
}

extern "C" __global__ void causal_conv1d_kernel(__nv_bfloat16* __restrict__ out,
                                                const __nv_bfloat16* __restrict__ x,
                                                const __nv_bfloat16* __restrict__ weight,
                                                const __nv_bfloat16* __restrict__ bias,
                                                const __nv_bfloat16* __restrict__ initial_state,
                                                int C, int T, int W) {
    const long long n = (long long)C * T;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long nvec = n / 8;
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < (n + 7) / 8;
         v += stride) {
        const long long f0 = v * 8;
        const long long c0 = f0 / T;
        const int t0 = (int)(f0 % T);
        if (W == 4 && v < nvec && t0 >= 3 && t0 + 8 <= T) {
            // fast path: one channel, all taps inside x
            const uint4 p = *reinterpret_cast<const uint4*>(x + f0);
            const __nv_bfloat16* p8 = reinterpret_cast<const __nv_bfloat16*>(&p);
            float s[11];
            s[0] = bf(x[f0 - 3]);
            s[1] = bf(x[f0 - 2]);
            s[2] = bf(x[f0 - 1]);
#pragma unroll
            for (int e = 0; e < 8; ++e) s[3 + e] = bf(p8[e]);
            const uint2 wp = *reinterpret_cast<const uint2*>(weight + c0 * 4);
            const __nv_bfloat16* w4 = reinterpret_cast<const __nv_bfloat16*>(&wp);
            const float w0 = bf(w4[0]), w1 = bf(w4[1]), w2 = bf(w4[2]), w3 = bf(w4[3]);
            const float b = bf(bias[c0]);
            uint4 r;
            __nv_bfloat16* r8 = reinterpret_cast<__nv_bfloat16*>(&r);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                float acc = b;
                acc = __fadd_rn(acc, __fmul_rn(w0, s[e]));
                acc = __fadd_rn(acc, __fmul_rn(w1, s[e + 1]));
                acc = __fadd_rn(acc, __fmul_rn(w2, s[e + 2]));
                acc = __fadd_rn(acc, __fmul_rn(w3, s[e + 3]));
                r8[e] = finish(acc);
            }
            *reinterpret_cast<uint4*>(out + f0) = r;
        } else {
            // general path: elements f0 .. f0+7 (fewer at the end), any channel layout / width
            const long long fe = min(f0 + 8, n);
            for (long long f = f0; f < fe; ++f) {
                const long long c = f / T;
                const int t = (int)(f % T);
                float acc = bf(bias[c]);
                for (int j = 0; j < W; ++j) {
                    acc = __fadd_rn(acc, __fmul_rn(bf(weight[c * W + j]), tap(x, initial_state, c, T, W, t + j)));
                }
                out[f] = finish(acc);
            }
        }
    }
}
