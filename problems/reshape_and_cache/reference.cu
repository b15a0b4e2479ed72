/* atrex:plan
[[launch]]
kernel = "cache_copy_ref"
grid = ["min(ceil(NB * bs * H * D / 256), 65535)"]
block = [256]
args = ["key_cache_out", "value_cache_out", "key_cache", "value_cache", "NB * bs * H * D:i64"]

[[launch]]
kernel = "scatter_ref"
grid = ["min(ceil(T * H * D / 256), 65535)"]
block = [256]
args = ["key_cache_out", "value_cache_out", "key", "value", "slot_mapping",
        "T:i64", "H * D:i64", "bs:i64"]
*/
// Reference reshape_and_cache (flash layout [NB, bs, H, D]): the outputs are new tensors.
// 1) copy both input caches to the outputs element by element;
// 2) for each token t with s = slot_mapping[t] >= 0, write key[t] / value[t] (H*D elements)
//    to block s // bs, offset s % bs. Launches run in order on one stream.
#include <cuda_bf16.h>

extern "C" __global__ void cache_copy_ref(__nv_bfloat16* key_cache_out, __nv_bfloat16* value_cache_out,
                                          const __nv_bfloat16* key_cache,
                                          const __nv_bfloat16* value_cache, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        key_cache_out[i] = key_cache[i];
        value_cache_out[i] = value_cache[i];
    }
}

extern "C" __global__ void scatter_ref(__nv_bfloat16* key_cache_out, __nv_bfloat16* value_cache_out,
                                       const __nv_bfloat16* key, const __nv_bfloat16* value,
                                       const long long* slot_mapping, long long T, long long HD,
                                       long long bs) {
    const long long n = T * HD;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / HD, e = i % HD;
        const long long s = slot_mapping[t];
        if (s < 0) continue;
        const long long block = s / bs, off = s % bs;
        const long long dst = (block * bs + off) * HD + e;
        key_cache_out[dst] = key[i];
        value_cache_out[dst] = value[i];
    }
}
