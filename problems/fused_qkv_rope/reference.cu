/* atrex:plan
[[launch]]
kernel = "fused_qkv_rope_ref"
grid = ["min(ceil(T * (H + 2 * KV) * D / 256), 65535)"]
block = [256]
args = ["q", "k", "v", "qkv", "positions", "T:i64", "H:i32", "KV:i32", "D:i32", "R:i32",
        "rope_base:f32", "if(dtype == 'fp16', 1, 0):i32"]
*/
// Reference fused_qkv_rope, in the shape's dtype (bf16 or fp16): one thread per output element
// of q, k and v. q = qkv columns [0, H·D), k = [H·D, (H+KV)·D), v = [(H+KV)·D, (H+2KV)·D),
// per token. For q and k, element i < R of a head: with half = R/2, j = i mod half,
//   inv_freq_j = 1 / base^(fp32(2j) / R)   (fp32 pow, then fp32 reciprocal)
//   θ = float(positions[t]) · inv_freq_j;  c = cos θ, s = sin θ (fp32)
//   y[i] = x[i]·c − x[i+half]·s (i < half),  y[i] = x[i]·c + x[i−half]·s (i >= half),
// products and the sum rounded separately (explicit _rn: no FMA contraction), then the dtype.
// Elements i >= R and all of v are copied.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__device__ void rope(T* q, T* k, T* v, const T* qkv, const int* positions, long long T_, int H,
                     int KV, int D, int R, float base) {
    const int NH = H + 2 * KV;
    const long long n = T_ * NH * D;
    const int half = R / 2;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long t = idx / ((long long)NH * D);
        const int col = (int)(idx % ((long long)NH * D));
        const int head = col / D, i = col % D;
        const T* x = qkv + t * NH * D + (long long)head * D;
        T y;
        if (head < H + KV && i < R) {
            const int j = i < half ? i : i - half;
            const float e = __fdiv_rn((float)(2 * j), (float)R);
            const float inv_freq = __fdiv_rn(1.0f, powf(base, e));
            const float theta = __fmul_rn((float)positions[t], inv_freq);
            const float c = cosf(theta), s = sinf(theta);
            const float xi = to_f(x[i]);
            float r;
            if (i < half) {
                r = __fsub_rn(__fmul_rn(xi, c), __fmul_rn(to_f(x[i + half]), s));
            } else {
                r = __fadd_rn(__fmul_rn(xi, c), __fmul_rn(to_f(x[i - half]), s));
            }
            y = from_f<T>(r);
        } else {
            y = x[i];
        }
        if (head < H) {
            q[(t * H + head) * D + i] = y;
        } else if (head < H + KV) {
            k[(t * KV + head - H) * D + i] = y;
        } else {
            v[(t * KV + head - H - KV) * D + i] = y;
        }
    }
}

extern "C" __global__ void fused_qkv_rope_ref(void* q, void* k, void* v, const void* qkv,
                                              const int* positions, long long T, int H, int KV,
                                              int D, int R, float base, int is_fp16) {
    if (is_fp16)
        rope<__half>((__half*)q, (__half*)k, (__half*)v, (const __half*)qkv, positions, T, H, KV, D,
                     R, base);
    else
        rope<__nv_bfloat16>((__nv_bfloat16*)q, (__nv_bfloat16*)k, (__nv_bfloat16*)v,
                            (const __nv_bfloat16*)qkv, positions, T, H, KV, D, R, base);
}
