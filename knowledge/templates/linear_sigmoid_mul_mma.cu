/* atrex:template
id = "tpl-linear-sigmoid-mul-mma"
title = "bf16 GEMM with mma.sync m16n8k16 and a fused bias + sigmoid + multiply epilogue"
operator = "linear_sigmoid_mul"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["gemm"]
bottlenecks = ["compute", "balanced"]
category = "technique demonstration"
expected_gain = "none over the baseline on the H200 (measured below it or within 1 %); kept as a worked example. Intended: tensor cores instead of FMA: 10x+ over a CUDA-core GEMM; the epilogue saves a T x O round trip"
pitfalls = ["fragment layouts: a0..a3 rows g / g+8, cols 2t / 2t+8; b0, b1 k = 2t / 2t+8, n = g", "pad shared rows (+8 bf16) against bank conflicts", "on Hopper wgmma + TMA is the next step: mma.sync peaks near 60 % of the H200's dense bf16"]
[measured]
s_op = 0.0944
baseline_s_op = 0.1789
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "quick"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --quick`): S_op 0.094 against the baseline's 0.179;
// not faster than the baseline: a technique demonstration, ranked below the technique cards.
/* atrex:plan
[[launch]]
kernel = "linear_sigmoid_mul_mma"
grid = ["ceil(O / 128)", "ceil(T / 128)"]
block = ["256"]
args = ["out", "hidden_states", "weight", "bias", "post_mul_mat", "T:i32", "H:i32", "O:i32"]

[tune]
BK = [32, 64]
*/
// C[T, O] = hidden_states[T, H] · weight[O, H]^T. Block tile 128 × 128, 8 warps as 2 (M) × 4
// (N), each warp 64 × 32 = 4 × 4 mma tiles of 16 × 8. Epilogue per element:
// gate = bf16(acc + bias), sig = bf16(sigmoid(gate)), out = bf16(sig · post_mul_mat).
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define PAD 8

__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Loads a 128 × BK tile of a row-major [rows, K] matrix into shared memory (zero outside).
__device__ __forceinline__ void load_tile(__nv_bfloat16 (*dst)[BK + PAD],
                                          const __nv_bfloat16* __restrict__ src, int row0,
                                          int rows, int k0, int K) {
    constexpr int CHUNKS = BK / 8;  // 16-byte chunks per row
    for (int idx = threadIdx.x; idx < BM * CHUNKS; idx += blockDim.x) {
        const int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
        const int gr = row0 + r, gk = k0 + c;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (gr < rows) {
            const __nv_bfloat16* p = src + (long long)gr * K + gk;
            if (gk + 8 <= K && (K & 7) == 0) {
                val = *reinterpret_cast<const uint4*>(p);
            } else {
                __nv_bfloat16* v = reinterpret_cast<__nv_bfloat16*>(&val);
                for (int j = 0; j < 8; ++j) v[j] = gk + j < K ? p[j] : __float2bfloat16(0.0f);
            }
        }
        *reinterpret_cast<uint4*>(&dst[r][c]) = val;
    }
}

extern "C" __global__ void __launch_bounds__(256)
linear_sigmoid_mul_mma(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ A,
                       const __nv_bfloat16* __restrict__ W, const __nv_bfloat16* __restrict__ bias,
                       const __nv_bfloat16* __restrict__ post, int M, int K, int N) {
    __shared__ __align__(16) __nv_bfloat16 As[BM][BK + PAD];
    __shared__ __align__(16) __nv_bfloat16 Bs[BN][BK + PAD];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
    const int g = lane >> 2, t = lane & 3;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        __syncthreads();
        load_tile(As, A, m0, M, k0, K);
        load_tile(Bs, W, n0, N, k0, K);
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned af[4][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = wm + i * 16 + g;
                af[i][0] = *reinterpret_cast<const unsigned*>(&As[r][ks + 2 * t]);
                af[i][1] = *reinterpret_cast<const unsigned*>(&As[r + 8][ks + 2 * t]);
                af[i][2] = *reinterpret_cast<const unsigned*>(&As[r][ks + 2 * t + 8]);
                af[i][3] = *reinterpret_cast<const unsigned*>(&As[r + 8][ks + 2 * t + 8]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = wn + j * 8 + g;
                bf[j][0] = *reinterpret_cast<const unsigned*>(&Bs[n][ks + 2 * t]);
                bf[j][1] = *reinterpret_cast<const unsigned*>(&Bs[n][ks + 2 * t + 8]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma16816(acc[i][j], af[i], bf[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = m0 + wm + i * 16 + g + (r >= 2 ? 8 : 0);
                const int col = n0 + wn + j * 8 + 2 * t + (r & 1);
                if (row < M && col < N) {
                    const float gate = __bfloat162float(__float2bfloat16_rn(acc[i][j][r] + __bfloat162float(bias[col])));
                    const float sig = __bfloat162float(__float2bfloat16_rn(1.0f / (1.0f + expf(-gate))));
                    const long long o = (long long)row * N + col;
                    out[o] = __float2bfloat16_rn(sig * __bfloat162float(post[o]));
                }
            }
        }
    }
}
