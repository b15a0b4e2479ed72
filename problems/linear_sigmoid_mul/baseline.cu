/* atrex:plan
[[launch]]
kernel = "lsm_gemm"
grid = ["ceil(O / 128)", "ceil(T / 128)"]
block = [256]
args = ["out", "hidden_states", "weight", "bias", "post_mul_mat", "T:i32", "H:i32", "O:i32"]

[tune]
MINB = [1, 2]

[defines]
MINB = 1
*/
// Baseline linear_sigmoid_mul: bf16 GEMM on tensor cores with the fused epilogue
//   gate = bf16(acc + bias), out = bf16(sigmoid(gate) · post_mul_mat).
// 128×128 tile per block, 8 warps of 64×32, mma.sync m16n8k16 bf16 → fp32; k-tiles of 32
// through cp.async (16 B, zero-fill past T / O) into padded shared rows, two stages;
// fragments via ldmatrix.x4. Needs H % 32 == 0 (every shape: 2048 or 4096).
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define BK 32
#define LDS 40

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}

__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One BK-slice of the warp's 64×32 tile: 2 k16 steps, 4×4 mma each.
__device__ __forceinline__ void warp_mma_slice(const __nv_bfloat16* As, const __nv_bfloat16* Bs, int wm, int wn, int lane,
                                               float (&acc)[4][4][4]) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
            const __nv_bfloat16* p = As + (wm * 64 + mi * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8;
            ldsm_x4(a[mi][0], a[mi][1], a[mi][2], a[mi][3], p);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            const __nv_bfloat16* p = Bs + (wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + ks * 16 + ((lane >> 3) & 1) * 8;
            ldsm_x4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1], p);
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) mma_bf16(acc[mi][nj], a[mi], b[nj]);
    }
}

extern "C" __global__ void __launch_bounds__(256, MINB) lsm_gemm(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
    const __nv_bfloat16* __restrict__ bias, const __nv_bfloat16* __restrict__ pm, int T, int H, int O) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    __shared__ __align__(16) __nv_bfloat16 As[2][BM * LDS];
    __shared__ __align__(16) __nv_bfloat16 Bs[2][BN * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
    const int lrow = tid >> 2, lch = (tid & 3) * 8;
    const __nv_bfloat16* ag[2];
    bool av[2];
    const __nv_bfloat16* bg[2];
    bool bv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = lrow + 64 * h;
        av[h] = m0 + r < T;
        ag[h] = x + (av[h] ? (long long)(m0 + r) * H : 0) + lch;
        bv[h] = n0 + r < O;
        bg[h] = w + (bv[h] ? (long long)(n0 + r) * H : 0) + lch;
    }
    float acc[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
    const int nk = H / BK;
    auto load = [&](int st, int kt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            cp_async16(&As[st][(lrow + 64 * h) * LDS + lch], ag[h] + kt * BK, av[h]);
            cp_async16(&Bs[st][(lrow + 64 * h) * LDS + lch], bg[h] + kt * BK, bv[h]);
        }
        cp_commit();
    };
    load(0, 0);
    for (int kt = 0; kt < nk; ++kt) {
        if (kt + 1 < nk) { load((kt + 1) & 1, kt + 1); cp_wait<1>(); } else { cp_wait<0>(); }
        __syncthreads();
        warp_mma_slice(As[kt & 1], Bs[kt & 1], wm, wn, lane, acc);
        __syncthreads();
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int m = m0 + wm * 64 + mi * 16 + (lane >> 2) + hr * 8;
            if (m >= T) continue;
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                const int n = n0 + wn * 32 + nj * 8 + (lane & 3) * 2;
                if (n >= O) continue;
                const long long o = (long long)m * O + n;
                const float2 bb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + n));
                const float2 pp = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(pm + o));
                const float g0 = __bfloat162float(__float2bfloat16_rn(acc[mi][nj][hr * 2] + bb.x));
                const float g1 = __bfloat162float(__float2bfloat16_rn(acc[mi][nj][hr * 2 + 1] + bb.y));
                const float s0 = 1.0f / (1.0f + __expf(-g0)), s1 = 1.0f / (1.0f + __expf(-g1));
                *reinterpret_cast<__nv_bfloat162*>(out + o) = __floats2bfloat162_rn(s0 * pp.x, s1 * pp.y);
            }
        }
}
