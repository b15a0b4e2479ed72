/* atrex:template
id = "tpl-reshape-and-cache"
title = "Paged KV-cache scatter in one launch: tokens into their slots with a byte map of written slots, a grid barrier, then only the unwritten slots copied"
operator = "reshape_and_cache"
architectures = ["hopper", "blackwell", "ada", "ampere"]
families = ["gather-scatter"]
bottlenecks = ["memory"]
category = "algorithm"
expected_gain = "no full copy of the input caches before the scatter: each output slot is written once (the written slots with the new rows, the rest from the input caches), and one launch instead of two"
pitfalls = ["slot -1 means skip the token", "the output caches are new tensors: untouched slots keep the input cache values", "slot_mapping is int64", "a grid barrier needs every block resident at once: launch it `cooperative = true` (the driver refuses a grid that cannot be, instead of a barrier that never opens) and keep the grid small (264 blocks of 256 threads); measured without it, 528 blocks of a 4-vector variant hung (registers allowed 3 blocks per SM) and the watchdog restarted the worker", "the byte map and the barrier counter live in a zeroed scratch (zero = true): the harness clears it before every run"]
[measured]
s_op = 0.3411
baseline_s_op = 0.2579
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.341, every shape passing at the strict level (docs/measurements/bench-best-reshape_and_cache.json).
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 8/8 shapes pass strict on 5 seeds): S_op 0.344 against the baseline's 0.258 and the copy-then-scatter kernel's 0.261 it replaces; 1.34x the baseline (docs/measurements/bench-best-reshape_and_cache.json). The median shapes 3 and 4 (520 and 1015 tokens × 16 heads × 128) 13.1 / 16.5 µs → 9.7 / 12.7 µs, the largest 25 → 17.5-19 µs. On the way (quick): scatter + mark and a second launch for the unwritten slots 0.282 (two launches cost more than the bytes saved); one launch with the grid barrier 0.327; U = 4 vectors in flight per thread 0.410 (U 2 0.408, U 8 0.379). Profile (shape 4, before U): 11 µs, latency-bound (long_scoreboard): each grid-stride step waited a memory trip.
/* atrex:plan
[[launch]]
kernel = "reshape_and_cache_one"
grid = ["max(1, min(BLOCKS, ceil(max(T, NB * bs) * H * D / (8 * 256 * U))))"]
block = [256]
cooperative = true
args = ["key_cache_out", "value_cache_out", "written", "key", "value", "key_cache", "value_cache",
        "slot_mapping", "T:i32", "H * D:i32", "NB * bs:i64"]

[[scratch]]
name = "written"   # one byte per cache slot (1: a token was written there), then the barrier's counter
dtype = "uint8"
size = "NB * bs + 16"
zero = true

[tune]
BLOCKS = [264, 132, 528]   # blocks (all resident at once: the launch is cooperative)
U = [4, 2, 8]              # 16-byte vectors per thread in flight at once
*/
// reshape_and_cache in one launch without copying the whole cache first:
//  1. every token's K and V rows (16-byte vectors, grid-stride) into its slot, the slot marked in
//     a zeroed byte map;
//  2. a grid-wide barrier (an atomic counter in the same zeroed scratch); the launch is
//     cooperative, so every block is resident or the launch fails;
//  3. the slots no token wrote copied from the input caches.
// Every output slot is written once per run. With every slot written (the benchmark's inputs)
// the input caches are never read.
#include <cuda_bf16.h>

#ifndef U
#define U 4
#endif

__device__ __forceinline__ void grid_barrier(unsigned int* counter) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        unsigned int seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
        } while (seen < gridDim.x);
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(256) reshape_and_cache_one(
    __nv_bfloat16* __restrict__ kout, __nv_bfloat16* __restrict__ vout, unsigned char* __restrict__ written,
    const __nv_bfloat16* __restrict__ key, const __nv_bfloat16* __restrict__ value,
    const __nv_bfloat16* __restrict__ kin, const __nv_bfloat16* __restrict__ vin,
    const long long* __restrict__ slot_mapping, int T, int HD, long long nslots) {
    unsigned int* counter = reinterpret_cast<unsigned int*>(written + ((nslots + 3) & ~3ll));
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = (HD & 7) == 0;
    const int per = vec ? HD / 8 : HD;  // units (16-byte vectors or elements) per row
    // 1. scatter and mark: U vectors per thread at a time, every load issued before any store
    //    (one memory trip per U vectors, not one per vector)
    const long long total = (long long)T * per;
    if (vec) {
        for (long long base = gtid; base < total; base += stride * U) {
            uint4 a[U], b[U];
            long long slot[U], t[U];
            int u[U];
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const long long i = base + k * stride;
                slot[k] = -1;
                if (i < total) {
                    t[k] = i / per;
                    u[k] = (int)(i - t[k] * per);
                    slot[k] = __ldg(slot_mapping + t[k]);
                    a[k] = __ldcs(reinterpret_cast<const uint4*>(key + t[k] * HD) + u[k]);
                    b[k] = __ldcs(reinterpret_cast<const uint4*>(value + t[k] * HD) + u[k]);
                }
            }
#pragma unroll
            for (int k = 0; k < U; ++k) {
                if (slot[k] < 0 || slot[k] >= nslots) continue;
                __stcs(reinterpret_cast<uint4*>(kout + slot[k] * HD) + u[k], a[k]);
                __stcs(reinterpret_cast<uint4*>(vout + slot[k] * HD) + u[k], b[k]);
                if (u[k] == 0) written[slot[k]] = 1;
            }
        }
    } else {
        for (long long i = gtid; i < total; i += stride) {
            const long long t = i / per;
            const int u = (int)(i - t * per);
            const long long slot = __ldg(slot_mapping + t);
            if (slot < 0 || slot >= nslots) continue;
            kout[slot * HD + u] = key[t * HD + u];
            vout[slot * HD + u] = value[t * HD + u];
            if (u == 0) written[slot] = 1;
        }
    }
    // 2. every mark is set before any block reads one
    grid_barrier(counter);
    // 3. the slots nobody wrote keep the input caches' rows
    for (long long i = gtid; i < nslots * per; i += stride) {
        const long long slot = i / per;
        const int u = (int)(i - slot * per);
        if (__ldcg(written + slot)) continue;
        if (vec) {
            reinterpret_cast<uint4*>(kout + slot * HD)[u] = __ldg(reinterpret_cast<const uint4*>(kin + slot * HD) + u);
            reinterpret_cast<uint4*>(vout + slot * HD)[u] = __ldg(reinterpret_cast<const uint4*>(vin + slot * HD) + u);
        } else {
            kout[slot * HD + u] = kin[slot * HD + u];
            vout[slot * HD + u] = vin[slot * HD + u];
        }
    }
}
