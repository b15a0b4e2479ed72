/* atrex:template
id = "tpl-attention-forward-flash"
title = "Flash-style varlen attention (fp32 CUDA cores): K/V tiles in shared memory, online softmax"
operator = "attention_forward"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["attention"]
bottlenecks = ["compute"]
category = "algorithm"
expected_gain = "O(T) memory and one pass over K/V per query block; the base for an mma.sync / wgmma version"
pitfalls = ["pad the K tile rows (D + 1 floats) to avoid 32-way bank conflicts", "every warp joins the tile loads and barriers even past the sequence end", "fp32 math is far from the tensor-core roofline: move QK^T and PV to mma for real speed"]
*/
/* atrex:plan
[[launch]]
kernel = "attention_flash_fp32"
grid = ["ceil(T / WARPS)", "H", "n"]
block = ["32 * WARPS"]
args = ["out", "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "H:i32", "D:i32", "1 / sqrt(D):f32"]

[tune]
WARPS = [8, 4, 16]
*/
// One warp per query row; a block shares each 32-key tile of K and V (converted to fp32 in
// shared memory). Lane j scores key j of the tile; the running max / sum / accumulator follow
// the online softmax; lane l accumulates output dims l, l + 32, l + 64, l + 96.
#include <cuda_bf16.h>

#define MAXD 128
#define TK 32
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void attention_flash_fp32(__nv_bfloat16* __restrict__ out,
                                                const __nv_bfloat16* __restrict__ q,
                                                const __nv_bfloat16* __restrict__ k,
                                                const __nv_bfloat16* __restrict__ v,
                                                const int* __restrict__ cu_q,
                                                const int* __restrict__ cu_k, int H, int D,
                                                float scale) {
    __shared__ float Ks[TK][MAXD + 1];
    __shared__ float Vs[TK][MAXD];
    __shared__ float Qs[WARPS][MAXD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.y, seq = blockIdx.z;
    const int qs = cu_q[seq], qe = cu_q[seq + 1];
    const int ks = cu_k[seq], ke = cu_k[seq + 1];
    const int q0 = qs + blockIdx.x * WARPS;
    if (q0 >= qe) return;  // uniform over the block
    const int row = q0 + warp;
    const bool active = row < qe;
    for (int d = lane; d < MAXD; d += 32)
        Qs[warp][d] = (active && d < D) ? __bfloat162float(q[((long long)row * H + h) * D + d]) * scale : 0.0f;
    float acc[MAXD / 32];
#pragma unroll
    for (int i = 0; i < MAXD / 32; ++i) acc[i] = 0.0f;
    float m = NEG_INF, l = 0.0f;
    for (int kb = ks; kb < ke; kb += TK) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < TK * D; idx += blockDim.x) {
            const int j = idx / D, d = idx - j * D;
            const int key = kb + j;
            const long long g = ((long long)key * H + h) * D + d;
            Ks[j][d] = key < ke ? __bfloat162float(k[g]) : 0.0f;
            Vs[j][d] = key < ke ? __bfloat162float(v[g]) : 0.0f;
        }
        __syncthreads();
        float s = NEG_INF;
        if (kb + lane < ke) {
            s = 0.0f;
            for (int d = 0; d < D; ++d) s += Qs[warp][d] * Ks[lane][d];
        }
        float tmax = s;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
        const float mnew = fmaxf(m, tmax);
        const float corr = expf(m - mnew);  // exp(-inf) = 0 on the first tile
        const float p = (kb + lane < ke) ? expf(s - mnew) : 0.0f;
        float psum = p;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
        l = l * corr + psum;
        m = mnew;
#pragma unroll
        for (int i = 0; i < MAXD / 32; ++i) acc[i] *= corr;
        const int nk = min(TK, ke - kb);
        for (int j = 0; j < nk; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < MAXD / 32; ++i) {
                const int d = lane + 32 * i;
                if (d < D) acc[i] += pj * Vs[j][d];
            }
        }
    }
    if (!active) return;
    const float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < MAXD / 32; ++i) {
        const int d = lane + 32 * i;
        if (d < D) out[((long long)row * H + h) * D + d] = __float2bfloat16_rn(acc[i] * inv);
    }
}
