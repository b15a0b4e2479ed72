/* atrex:template
id = "tpl-reshape-and-cache"
title = "Paged KV-cache scatter: vectorized cache copy, then one block per token scatters K and V"
operator = "reshape_and_cache"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["gather-scatter"]
bottlenecks = ["memory"]
category = "vectorization"
expected_gain = "the copy runs at copy bandwidth; the scatter is 16-byte stores of whole heads"
pitfalls = ["slot -1 means skip the token", "the output caches are new tensors: untouched slots keep the input cache values", "slot_mapping is int64"]
[measured]
s_op = 0.2613
baseline_s_op = 0.2579
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 8/8 shapes pass strict on 5 seeds): S_op 0.261 against the baseline's 0.258; 1.01x the baseline (docs/measurements/bench-best-reshape_and_cache.json).
/* atrex:plan
[[launch]]
kernel = "cache_copy"
grid = ["max(1, min(132 * 8, ceil(NB * bs * H * D / (8 * COPY_BLOCK))))"]
block = ["COPY_BLOCK"]
args = ["key_cache_out", "value_cache_out", "key_cache", "value_cache", "NB * bs * H * D:i64"]

[[launch]]
kernel = "cache_scatter"
grid = ["T"]
block = ["min(1024, max(32, H * D // 8))"]
args = ["key_cache_out", "value_cache_out", "key", "value", "slot_mapping", "H * D:i32"]

[tune]
COPY_BLOCK = [256, 512, 1024]
*/
// Layout [NB, bs, H, D]: slot s = block · bs + offset starts at element s · H · D, so a token's
// H · D values are contiguous in both the source and the cache.
#include <cuda_bf16.h>

extern "C" __global__ void cache_copy(uint4* __restrict__ kout, uint4* __restrict__ vout,
                                      const uint4* __restrict__ kin, const uint4* __restrict__ vin,
                                      long long elems) {
    const long long nv = elems / 8;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nv;
         i += (long long)gridDim.x * blockDim.x) {
        kout[i] = __ldg(kin + i);
        vout[i] = __ldg(vin + i);
    }
    // Tail (elems % 8) element by element.
    const long long tail = nv * 8;
    if (blockIdx.x == 0) {
        for (long long e = tail + threadIdx.x; e < elems; e += blockDim.x) {
            reinterpret_cast<__nv_bfloat16*>(kout)[e] = reinterpret_cast<const __nv_bfloat16*>(kin)[e];
            reinterpret_cast<__nv_bfloat16*>(vout)[e] = reinterpret_cast<const __nv_bfloat16*>(vin)[e];
        }
    }
}

extern "C" __global__ void cache_scatter(__nv_bfloat16* __restrict__ kout,
                                         __nv_bfloat16* __restrict__ vout,
                                         const __nv_bfloat16* __restrict__ key,
                                         const __nv_bfloat16* __restrict__ value,
                                         const long long* __restrict__ slot_mapping, int HD) {
    const long long t = blockIdx.x;
    const long long slot = slot_mapping[t];
    if (slot < 0) return;
    const __nv_bfloat16* ks = key + t * HD;
    const __nv_bfloat16* vs = value + t * HD;
    __nv_bfloat16* kd = kout + slot * HD;
    __nv_bfloat16* vd = vout + slot * HD;
    if ((HD & 7) == 0) {
        for (int i = threadIdx.x; i < HD / 8; i += blockDim.x) {
            reinterpret_cast<uint4*>(kd)[i] = __ldg(reinterpret_cast<const uint4*>(ks) + i);
            reinterpret_cast<uint4*>(vd)[i] = __ldg(reinterpret_cast<const uint4*>(vs) + i);
        }
    } else {
        for (int i = threadIdx.x; i < HD; i += blockDim.x) {
            kd[i] = ks[i];
            vd[i] = vs[i];
        }
    }
}
