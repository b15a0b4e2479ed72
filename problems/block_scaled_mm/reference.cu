/* atrex:plan
[[launch]]
kernel = "bsmm_ref"
grid = ["ceil(N / 128)", "ceil(M / 128)"]
block = [256]
args = ["out", "a", "b", "a_scales", "b_scales", "M:i32", "N:i32", "K:i32", "gn:i32", "gk:i32"]
*/
// Reference block-scaled FP8 (e4m3fn) GEMM, spec section 5:
//   out[i, j] = Σ_g (P[i, j, g] · a_scales[i, g]) · b_scales[j // gn, g],
//   P[i, j, g] = Σ_c A[i, g·gk + c] · B[j, g·gk + c] (exact fp8 products, fp32 FMA chain),
// the partials summed in increasing g from 0 in fp32 (two rounded multiplies, one add each).
// 128×128 output tiles, 8×8 per thread, k-steps of 8 through shared memory (gk % 8 == 0).
#include <cuda_fp8.h>

__device__ __forceinline__ float e4m3fn_to_f(unsigned char c) {
    const int e = (c >> 3) & 15, m = c & 7;
    float v;
    if (e == 15 && m == 7) v = __int_as_float(0x7fc00000);
    else v = e == 0 ? (float)m * 0.001953125f : (float)(8 + m) * __uint_as_float((unsigned)(e - 10 + 127) << 23);
    return (c & 0x80) ? -v : v;
}

#define BM 128
#define BN 128
#define BK 8

extern "C" __global__ void __launch_bounds__(256) bsmm_ref(
    float* __restrict__ out, const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
    const float* __restrict__ sa, const float* __restrict__ sb, int M, int N, int K, int gn, int gk) {
    const int nK = K / gk;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const unsigned char* arow = m0 + lr < M ? a + (long long)(m0 + lr) * K : nullptr;
    const unsigned char* brow = n0 + lr < N ? b + (long long)(n0 + lr) * K : nullptr;
    float acc[8][8], p[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) { acc[i][j] = 0.0f; p[i][j] = 0.0f; }
    for (int g = 0; g < nK; ++g) {
        for (int k0 = g * gk; k0 < (g + 1) * gk; k0 += BK) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int k = k0 + lk + q;
                As[lk + q][lr] = arow ? e4m3fn_to_f(arow[k]) : 0.0f;
                Bs[lk + q][lr] = brow ? e4m3fn_to_f(brow[k]) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float av[8], bv[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 8; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) p[i][j] = __fmaf_rn(av[i], bv[j], p[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int m = m0 + ty + 16 * i;
            const float s_a = m < M ? sa[(long long)m * nK + g] : 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int n = n0 + tx + 16 * j;
                const float s_b = n < N ? sb[(long long)(n / gn) * nK + g] : 0.0f;
                acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(__fmul_rn(p[i][j], s_a), s_b));
                p[i][j] = 0.0f;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + ty + 16 * i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int n = n0 + tx + 16 * j;
            if (n < N) out[(long long)m * N + n] = acc[i][j];
        }
    }
}
