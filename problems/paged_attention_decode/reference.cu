/* atrex:plan
[[launch]]
kernel = "paged_attention_decode_ref"
grid = ["Hq", "S"]
block = [256]
smem = "4 * (D + L + 2)"
args = ["out", "query", "k_cache", "v_cache", "block_tables", "seq_lens",
        "Hq:i32", "Hk:i32", "D:i32", "bs:i32", "mb:i32", "L:i32", "if(dtype == 'fp16', 1, 0):i32"]
*/
// Reference paged_attention_decode: one query per request over the x-split paged KV cache.
// For request i and position p < seq_lens[i]: β = block_tables[i, p // bs], o = p mod bs,
//   K_p[g, d] = k_cache[β, g, d // x, o, d mod x]  (x = 8 elements = 16 bytes),
//   V_p[g, d] = v_cache[β, g, d, o];
// query head h reads KV head g = h // (Hq/Hk); in fp32: score = (q·K_p)/sqrt(D), prob = softmax
// over p (no mask), out = T(Σ_p prob·V_p) with T the shape's dtype (bf16 or fp16); a request
// with seq_len ≤ 0 gives zeros.
// One block per (head, request); scores staged in shared memory (seq_len ≤ ctx_len L); the max
// and the sum are taken sequentially by one thread, so the result is plainly deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The operator runs in bf16 or fp16 (the shape's `dtype`): one body, two instantiations.
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__device__ void attend(T* out, const T* query, const T* k_cache, const T* v_cache, const int* block_tables,
                       const int* seq_lens, int Hq, int Hk, int D, int bs, int mb, int L) {
    extern __shared__ float sm[];
    float* qs = sm;          // [D]
    float* sc = qs + D;      // [L] scores, then probabilities
    float* red = sc + L;     // [2] max, sum
    const int X = 8;
    const int h = blockIdx.x, i = blockIdx.y, tid = threadIdx.x;
    const int len = seq_lens[i];
    T* o = out + ((long long)i * Hq + h) * D;
    if (len <= 0) {
        for (int d = tid; d < D; d += blockDim.x) o[d] = from_f<T>(0.0f);
        return;
    }
    if (len > L) __trap();  // scores are staged for at most ctx_len positions
    const int g = h / (Hq / Hk);
    const float scale = 1.0f / sqrtf((float)D);
    for (int d = tid; d < D; d += blockDim.x) qs[d] = to_f(query[((long long)i * Hq + h) * D + d]);
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32, warps = blockDim.x / 32;
    for (int p = warp; p < len; p += warps) {
        const long long beta = block_tables[(long long)i * mb + p / bs];
        const int off = p % bs;
        float s = 0.0f;
        for (int d = lane; d < D; d += 32) {
            const long long at = (((beta * Hk + g) * (D / X) + d / X) * bs + off) * X + d % X;
            s += qs[d] * to_f(k_cache[at]);
        }
        for (int w = 16; w > 0; w >>= 1) s += __shfl_xor_sync(0xffffffffu, s, w);
        if (lane == 0) sc[p] = s * scale;
    }
    __syncthreads();
    if (tid == 0) {
        float mx = sc[0];
        for (int p = 1; p < len; ++p) mx = fmaxf(mx, sc[p]);
        red[0] = mx;
    }
    __syncthreads();
    for (int p = tid; p < len; p += blockDim.x) sc[p] = expf(sc[p] - red[0]);
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (int p = 0; p < len; ++p) sum += sc[p];
        red[1] = sum;
    }
    __syncthreads();
    for (int p = tid; p < len; p += blockDim.x) sc[p] = sc[p] / red[1];
    __syncthreads();
    for (int d = tid; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int p = 0; p < len; ++p) {
            const long long beta = block_tables[(long long)i * mb + p / bs];
            const long long at = ((beta * Hk + g) * D + d) * bs + p % bs;
            acc += sc[p] * to_f(v_cache[at]);
        }
        o[d] = from_f<T>(acc);
    }
}

extern "C" __global__ void paged_attention_decode_ref(void* out, const void* query, const void* k_cache,
                                                      const void* v_cache, const int* block_tables,
                                                      const int* seq_lens, int Hq, int Hk, int D, int bs,
                                                      int mb, int L, int is_fp16) {
    if (is_fp16)
        attend<__half>((__half*)out, (const __half*)query, (const __half*)k_cache, (const __half*)v_cache,
                       block_tables, seq_lens, Hq, Hk, D, bs, mb, L);
    else
        attend<__nv_bfloat16>((__nv_bfloat16*)out, (const __nv_bfloat16*)query, (const __nv_bfloat16*)k_cache,
                              (const __nv_bfloat16*)v_cache, block_tables, seq_lens, Hq, Hk, D, bs, mb, L);
}
