/* atrex:template
id = "tpl-silu-and-mul-tma"
title = "SwiGLU through the Hopper copy engine: TMA tile loads and stores, mbarrier, clusters, >48 KiB shared memory"
operator = "silu_and_mul"
architectures = ["hopper", "blackwell"]
families = ["elementwise"]
bottlenecks = ["memory"]
category = "technique demonstration"
expected_gain = "none on its own: a worked example of the launch plan's tensor maps, clusters and large dynamic shared memory, to build TMA pipelines on"
pitfalls = ["the tensor map's box inner dimension must be a multiple of 16 bytes", "ordinary stores to shared memory that the copy engine reads next need fence.proxy.async before the barrier", "wait for the bulk store to finish reading shared memory (cp.async.bulk.wait_group.read) before the block exits", "grid.x must be a whole number of clusters"]
[measured]
s_op = 0.325
baseline_s_op = 0.553
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "full"
*/
/* atrex:plan
[[tensor_map]]
name = "tm_x"                  # the input, [T, 2d]: gate and up halves are two boxes of one row band
tensor = "x"
dtype = "bf16"
dims = ["2 * d", "T"]          # innermost first
box = ["64", "ROWS"]
l2_promotion = "256B"

[[tensor_map]]
name = "tm_out"
tensor = "out"
dtype = "bf16"
dims = ["d", "T"]
box = ["64", "ROWS"]

[[launch]]
kernel = "silu_and_mul_tma"
grid = ["d / 64", "ceil(T / ROWS)"]
block = ["128"]
cluster = ["2", "1", "1"]
smem = "3 * 64 * ROWS * 2 + 64"
args = ["tm_x", "tm_out", "d:i32"]

[tune]
ROWS = [128, 64]
*/
// One block moves a 64-column x ROWS-row tile: thread 0 starts two TMA loads (gate and up)
// completing on an mbarrier, every thread computes bf16(bf16(silu(g)) * u) from shared memory
// into an output tile, and thread 0 stores that tile with one TMA store. ROWS = 128 needs 48 KiB
// + 64 bytes of dynamic shared memory (the harness raises the function's limit). Blocks run in
// clusters of two; a block that does not see its cluster writes nothing (the check then fails),
// so a measured pass also shows the cluster launch took effect. d must be a multiple of 128.
//
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 37/37 shapes pass): S_op 0.325 against the
// baseline's 0.553 — slower, as expected of one tile per block with nothing in flight while it
// computes. Limiter (profile, shape 8, 232 us): occupancy 23% (49 KiB shared memory per block
// allows 4 blocks/SM), DRAM 71% of peak. To make TMA pay: a persistent grid that loops over
// tiles with 2-3 shared-memory stages so loads overlap the math, and smaller stages.
#include <cuda_bf16.h>

#ifndef ROWS
#define ROWS 128
#endif

// The driver's CUtensorMap, passed by value (128 bytes, 64-byte aligned).
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float silu_rounded(float g) {
    return __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g))));
}

__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int c0, int c1,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void tma_store_2d(const TensorMap* map, int c0, int c1,
                                             const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(c0), "r"(c1), "r"(smem_addr(src))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

extern "C" __global__ void __launch_bounds__(128)
    silu_and_mul_tma(const __grid_constant__ TensorMap tm_x,
                     const __grid_constant__ TensorMap tm_out, int d) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __nv_bfloat16* gate = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* up = gate + 64 * ROWS;
    __nv_bfloat16* out = up + 64 * ROWS;
    unsigned long long* bar_ptr = reinterpret_cast<unsigned long long*>(out + 64 * ROWS);
    const unsigned bar = smem_addr(bar_ptr);

    unsigned ranks;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
    if (ranks != 2) return;

    const int c0 = blockIdx.x * 64;
    const int r0 = blockIdx.y * ROWS;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned bytes = 2u * 64u * ROWS * 2u;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "r"(bytes)
                     : "memory");
        tma_load_2d(gate, &tm_x, c0, r0, bar);
        tma_load_2d(up, &tm_x, d + c0, r0, bar);
    }
    wait_parity(bar, 0);

    // 8 bf16 (16 bytes) per step; rows past T were read as zeros and are not stored.
    for (int v = threadIdx.x; v < 64 * ROWS / 8; v += blockDim.x) {
        uint4 gp = reinterpret_cast<const uint4*>(gate)[v];
        uint4 upp = reinterpret_cast<const uint4*>(up)[v];
        uint4 r;
        const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gp);
        const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&upp);
        __nv_bfloat162* r2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 g = __bfloat1622float2(g2[k]);
            float2 u = __bfloat1622float2(u2[k]);
            r2[k] = __floats2bfloat162_rn(silu_rounded(g.x) * u.x, silu_rounded(g.y) * u.y);
        }
        reinterpret_cast<uint4*>(out)[v] = r;
    }
    // The copy engine reads the tile next: make the ordinary stores visible to it.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) tma_store_2d(&tm_out, c0, r0, out);
}
