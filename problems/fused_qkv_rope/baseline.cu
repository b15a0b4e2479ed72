/* atrex:plan
[[launch]]
kernel = "fused_qkv_rope_kernel"
grid = ["T", "ceil((H + 2 * KV) / HEADS)"]
block = ["min(1024, 32 * ceil(max(32, HEADS * D // 16) / 32))"]
smem = "2 * 4 * (R // 2)"
args = ["q", "k", "v", "qkv", "positions", "H:i32", "KV:i32", "D:i32", "R:i32", "rope_base:f32",
        "if(dtype == 'fp16', 1, 0):i32"]

[tune]
HEADS = [8, 4, 16, 2]
*/
// Baseline fused_qkv_rope in the shape's dtype (bf16 or fp16: one body, two instantiations).
// Grid (token, group of HEADS heads). The block computes the token's cos/sin for the R/2 frequencies into shared memory (fp32: inv_freq = 1/base^(2j/R),
// θ = pos·inv_freq), then each thread handles 8 frequency pairs of one head: two 16-byte loads
// (x[8c..8c+8) and x[half+8c..]), the NeoX rotation in fp32 with separately rounded products
// and sums (bit-exact with the reference), two 16-byte stores into q or k; v heads are copied
// with the same 16-byte accesses. Scalar path when R != D or R/2 is not a multiple of 8.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef HEADS
#define HEADS 8
#endif

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename E>
__device__ __forceinline__ void rope(E* __restrict__ q, E* __restrict__ k, E* __restrict__ v,
                                     const E* __restrict__ qkv, const int* __restrict__ positions,
                                     int H, int KV, int D, int R, float base) {
    extern __shared__ float tab[];
    const int half = R / 2;
    float* cs = tab;
    float* sn = tab + half;
    const size_t t = blockIdx.x;
    const float pos = (float)positions[t];
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        const float e = __fdiv_rn((float)(2 * j), (float)R);
        const float inv_freq = __fdiv_rn(1.0f, powf(base, e));
        const float theta = __fmul_rn(pos, inv_freq);
        cs[j] = cosf(theta);
        sn[j] = sinf(theta);
    }
    __syncthreads();
    const int NH = H + 2 * KV;
    const int h0 = blockIdx.y * HEADS;
    const int nh = min(HEADS, NH - h0);
    const E* row = qkv + t * (size_t)NH * D;
    if (R == D && (half % 8) == 0) {
        const int chunks = half / 8;
        for (int task = threadIdx.x; task < nh * chunks; task += blockDim.x) {
            const int head = h0 + task / chunks;
            const int c0 = (task % chunks) * 8;
            const E* x = row + (size_t)head * D;
            E* y;
            if (head < H) y = q + (t * H + head) * (size_t)D;
            else if (head < H + KV) y = k + (t * KV + head - H) * (size_t)D;
            else y = v + (t * KV + head - H - KV) * (size_t)D;
            uint4 a = *reinterpret_cast<const uint4*>(x + c0);
            uint4 b = *reinterpret_cast<const uint4*>(x + half + c0);
            if (head < H + KV) {
                const E* a8 = reinterpret_cast<const E*>(&a);
                const E* b8 = reinterpret_cast<const E*>(&b);
                uint4 ya, yb;
                E* ya8 = reinterpret_cast<E*>(&ya);
                E* yb8 = reinterpret_cast<E*>(&yb);
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float x1 = to_f(a8[e]), x2 = to_f(b8[e]);
                    const float c = cs[c0 + e], s = sn[c0 + e];
                    ya8[e] = from_f<E>(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
                    yb8[e] = from_f<E>(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
                }
                a = ya;
                b = yb;
            }
            *reinterpret_cast<uint4*>(y + c0) = a;
            *reinterpret_cast<uint4*>(y + half + c0) = b;
        }
    } else {
        for (int task = threadIdx.x; task < nh * D; task += blockDim.x) {
            const int head = h0 + task / D;
            const int i = task % D;
            const E* x = row + (size_t)head * D;
            E out;
            if (head < H + KV && i < R) {
                const int j = i < half ? i : i - half;
                const float xi = to_f(x[i]);
                const float c = cs[j], s = sn[j];
                const float r = i < half
                                    ? __fsub_rn(__fmul_rn(xi, c), __fmul_rn(to_f(x[i + half]), s))
                                    : __fadd_rn(__fmul_rn(xi, c), __fmul_rn(to_f(x[i - half]), s));
                out = from_f<E>(r);
            } else {
                out = x[i];
            }
            if (head < H) q[(t * H + head) * (size_t)D + i] = out;
            else if (head < H + KV) k[(t * KV + head - H) * (size_t)D + i] = out;
            else v[(t * KV + head - H - KV) * (size_t)D + i] = out;
        }
    }
}

extern "C" __global__ void fused_qkv_rope_kernel(void* q, void* k, void* v, const void* qkv,
                                                 const int* positions, int H, int KV, int D, int R,
                                                 float base, int is_fp16) {
    if (is_fp16)
        rope<__half>((__half*)q, (__half*)k, (__half*)v, (const __half*)qkv, positions, H, KV, D, R,
                     base);
    else
        rope<__nv_bfloat16>((__nv_bfloat16*)q, (__nv_bfloat16*)k, (__nv_bfloat16*)v,
                            (const __nv_bfloat16*)qkv, positions, H, KV, D, R, base);
}
