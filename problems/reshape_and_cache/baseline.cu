/* atrex:plan
[[launch]]
kernel = "cache_copy"
grid = ["max(1, min(ceil(NB * bs * H * D / (8 * COPY_BLOCK)), 132 * 16))"]
block = ["COPY_BLOCK"]
args = ["key_cache_out", "value_cache_out", "key_cache", "value_cache", "NB * bs * H * D:i64"]

[[launch]]
kernel = "scatter_tokens"
grid = ["ceil(T / TOKENS_PER_BLOCK)"]
block = ["SCATTER_BLOCK"]
args = ["key_cache_out", "value_cache_out", "key", "value", "slot_mapping",
        "T:i32", "H * D:i32", "bs:i32"]

[tune]
COPY_BLOCK = [256, 128, 512]
SCATTER_BLOCK = [256, 128, 64, 512]
TOKENS_PER_BLOCK = [1, 2, 4]
*/
// Baseline reshape_and_cache (flash layout [NB, bs, H, D]); the outputs are new tensors.
// 1) copy both input caches to the outputs with 16-byte loads/stores (grid-stride);
// 2) scatter: TOKENS_PER_BLOCK tokens per block, each token's key and value rows (H*D bf16)
//    copied with 16-byte accesses to slot s = slot_mapping[t] (skipped when s < 0).
// Scalar fallbacks when H*D (or the cache size) is not a multiple of 8 elements.
#include <cuda_bf16.h>

#ifndef COPY_BLOCK
#define COPY_BLOCK 256
#endif
#ifndef TOKENS_PER_BLOCK
#define TOKENS_PER_BLOCK 1
#endif

extern "C" __global__ void cache_copy(__nv_bfloat16* __restrict__ key_cache_out,
                                      __nv_bfloat16* __restrict__ value_cache_out,
                                      const __nv_bfloat16* __restrict__ key_cache,
                                      const __nv_bfloat16* __restrict__ value_cache, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nv = n / 8;
    const uint4* kc = reinterpret_cast<const uint4*>(key_cache);
    const uint4* vc = reinterpret_cast<const uint4*>(value_cache);
    uint4* ko = reinterpret_cast<uint4*>(key_cache_out);
    uint4* vo = reinterpret_cast<uint4*>(value_cache_out);
    for (long long i = tid; i < nv; i += stride) {
        uint4 a = kc[i];
        uint4 b = vc[i];
        ko[i] = a;
        vo[i] = b;
    }
    for (long long i = nv * 8 + tid; i < n; i += stride) {
        key_cache_out[i] = key_cache[i];
        value_cache_out[i] = value_cache[i];
    }
}

extern "C" __global__ void scatter_tokens(__nv_bfloat16* __restrict__ key_cache_out,
                                          __nv_bfloat16* __restrict__ value_cache_out,
                                          const __nv_bfloat16* __restrict__ key,
                                          const __nv_bfloat16* __restrict__ value,
                                          const long long* __restrict__ slot_mapping, int T, int HD,
                                          int bs) {
    for (int k = 0; k < TOKENS_PER_BLOCK; ++k) {
        const int t = blockIdx.x * TOKENS_PER_BLOCK + k;
        if (t >= T) return;
        const long long s = slot_mapping[t];
        if (s < 0) continue;
        const long long block = s / bs, off = s % bs;
        const size_t dst = (size_t)(block * bs + off) * HD;
        const size_t src = (size_t)t * HD;
        if ((HD % 8) == 0) {
            const uint4* ks = reinterpret_cast<const uint4*>(key + src);
            const uint4* vs = reinterpret_cast<const uint4*>(value + src);
            uint4* kd = reinterpret_cast<uint4*>(key_cache_out + dst);
            uint4* vd = reinterpret_cast<uint4*>(value_cache_out + dst);
            for (int i = threadIdx.x; i < HD / 8; i += blockDim.x) {
                uint4 a = ks[i];
                uint4 b = vs[i];
                kd[i] = a;
                vd[i] = b;
            }
        } else {
            for (int i = threadIdx.x; i < HD; i += blockDim.x) {
                key_cache_out[dst + i] = key[src + i];
                value_cache_out[dst + i] = value[src + i];
            }
        }
    }
}
