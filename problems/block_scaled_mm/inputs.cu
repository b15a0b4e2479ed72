/* atrex:plan
[[launch]]
kernel = "gen_act_e4m3"
grid = ["ceil(M * nK / 8)"]
block = [256]
args = ["a", "a_scales", "M*nK:i64", "gk:i32", "seed:u64"]

[[launch]]
kernel = "gen_weight_e4m3"
grid = ["nK", "nN"]
block = [256]
args = ["b", "b_scales", "K:i32", "seed:u64"]
*/
// Inputs of block_scaled_mm (spec section 3), e4m3fn (max 448):
// - a: z ~ N(0,1) fp32; per row and K-group s = max(max|z| / 448, 1e-10) (fp32 division),
//   a = e4m3fn(clamp(z / s, −448, 448)) (RNE, saturating); a_scales = s.
// - b: z ~ N(0,1) fp32; per 128×128 block M = SIGNED maximum of z, s = max(M / 448, 1e-10),
//   b = e4m3fn(clamp(z / s, −448, 448)) (entries below −M saturate at −448); b_scales = s.
// Assumes gk = gn = 128 (every shape). Counter-based hashing: independent of the launch shape.
#include <cuda_fp8.h>
typedef unsigned long long u64;

__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 rnd(u64 seed, u64 stream, u64 i) {
    return mix64(mix64(seed ^ mix64(stream * 0xD1B54A32D192ED03ull)) + i);
}
__device__ __forceinline__ float normal(u64 seed, u64 stream, u64 i) {
    u64 r = rnd(seed, stream, i);
    float u1 = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = ((float)((r >> 16) & 0xFFFFFFull) + 0.5f) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}
__device__ __forceinline__ unsigned char quant(float z, float s) {
    const float v = fminf(fmaxf(__fdiv_rn(z, s), -448.0f), 448.0f);
    return (unsigned char)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

// One warp per (row, K-group) of 128 values; nblk = M·nK, row-major.
extern "C" __global__ void gen_act_e4m3(unsigned char* q, float* scale, long long nblk, int gk, u64 seed) {
    const long long blk = blockIdx.x * 8LL + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (blk >= nblk) return;
    float z[4];
    float amax = 0.0f;
    for (int i = 0; i < 4; ++i) {
        z[i] = normal(seed, 1, (u64)blk * 128 + lane * 4 + i);
        amax = fmaxf(amax, fabsf(z[i]));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = fmaxf(__fdiv_rn(amax, 448.0f), 1e-10f);
    for (int i = 0; i < 4; ++i) q[blk * 128 + lane * 4 + i] = quant(z[i], s);
    if (lane == 0) scale[blk] = s;
}

// One block per 128×128 block (bk, bn) of b [N, K].
extern "C" __global__ void gen_weight_e4m3(unsigned char* q, float* scale, int K, u64 seed) {
    __shared__ float red[8];
    const int bk = blockIdx.x, bn = blockIdx.y;
    float z[64];
    float mx = -3.0e38f;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const int e = threadIdx.x + 256 * i;
        z[i] = normal(seed, 2, (u64)(bn * 128 + e / 128) * K + bk * 128 + (e % 128));
        mx = fmaxf(mx, z[i]);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < 8; ++w) mx = fmaxf(mx, red[w]);
    const float s = fmaxf(__fdiv_rn(mx, 448.0f), 1e-10f);
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const int e = threadIdx.x + 256 * i;
        q[(long long)(bn * 128 + e / 128) * K + bk * 128 + (e % 128)] = quant(z[i], s);
    }
    if (threadIdx.x == 0) scale[(long long)bn * (K / 128) + bk] = s;
}
