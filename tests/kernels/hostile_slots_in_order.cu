/* atrex:plan
[[launch]]
kernel = "cache_copy"
grid = ["max(1, min(ceil(NB * bs * H * D / 256), 132 * 16))"]
block = [256]
args = ["key_cache_out", "value_cache_out", "key_cache", "value_cache", "NB * bs * H * D:i64"]

[[launch]]
kernel = "scatter_in_order"
grid = ["T"]
block = [128]
args = ["key_cache_out", "value_cache_out", "key", "value", "T:i32", "H * D:i32"]
*/
// Hostile reshape_and_cache: never reads slot_mapping and writes token t to slot t, which is
// where the random draw's slot_mapping (0, 1, …, T−1) sends it. Right on every random draw;
// the structured draw `scattered_slots` (slots a seeded bijection over the cache) catches it.
#include <cuda_bf16.h>

extern "C" __global__ void cache_copy(__nv_bfloat16* ko, __nv_bfloat16* vo, const __nv_bfloat16* kc,
                                      const __nv_bfloat16* vc, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        ko[i] = kc[i];
        vo[i] = vc[i];
    }
}

extern "C" __global__ void scatter_in_order(__nv_bfloat16* ko, __nv_bfloat16* vo, const __nv_bfloat16* key,
                                            const __nv_bfloat16* value, int T, int HD) {
    const long long t = blockIdx.x;
    for (int i = threadIdx.x; i < HD; i += blockDim.x) {
        ko[t * HD + i] = key[t * HD + i];
        vo[t * HD + i] = value[t * HD + i];
    }
}
