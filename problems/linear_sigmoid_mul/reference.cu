/* atrex:plan
[[launch]]
kernel = "lsm_ref"
grid = ["ceil(O / 128)", "ceil(T / 128)"]
block = [256]
args = ["out", "hidden_states", "weight", "bias", "post_mul_mat", "T:i32", "H:i32", "O:i32"]
*/
// Reference linear_sigmoid_mul, spec section 5:
//   gate = bf16(Σ_h x[t,h]·W[o,h] + bias[o])   (fp32 FMA chain in increasing h, bias added
//                                               in fp32 before the single rounding)
//   out  = bf16(sigmoid(float(gate)) · float(post_mul_mat[t,o]))  with sigmoid = 1/(1+exp(−g)),
// exp computed in double and rounded to float. 128×128 tiles, 8×8 per thread, k-steps of 8.
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define BK 8

extern "C" __global__ void __launch_bounds__(256) lsm_ref(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
    const __nv_bfloat16* __restrict__ bias, const __nv_bfloat16* __restrict__ pm, int T, int H, int O) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const __nv_bfloat16* arow = m0 + lr < T ? x + (long long)(m0 + lr) * H : nullptr;
    const __nv_bfloat16* brow = n0 + lr < O ? w + (long long)(n0 + lr) * H : nullptr;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < H; k0 += BK) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int k = k0 + lk + q;
            As[lk + q][lr] = (arow && k < H) ? __bfloat162float(arow[k]) : 0.0f;
            Bs[lk + q][lr] = (brow && k < H) ? __bfloat162float(brow[k]) : 0.0f;
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
                for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + ty + 16 * i;
        if (m >= T) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int n = n0 + tx + 16 * j;
            if (n >= O) continue;
            const float g = __bfloat162float(__float2bfloat16_rn(__fadd_rn(acc[i][j], __bfloat162float(bias[n]))));
            const float sg = __fdiv_rn(1.0f, __fadd_rn(1.0f, (float)exp(-(double)g)));
            const long long o = (long long)m * O + n;
            out[o] = __float2bfloat16_rn(__fmul_rn(sg, __bfloat162float(pm[o])));
        }
    }
}
