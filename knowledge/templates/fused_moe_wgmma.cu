/* atrex:template
id = "tpl-fused-moe-wgmma"
title = "bf16 MoE expert FFN on Hopper: gathered-row wgmma grouped GEMMs (cp.async + TMA producer, two consumers), combine by atomic reduction"
operator = "fused_moe"
architectures = ["hopper"]
families = ["gemm", "moe"]
bottlenecks = ["compute", "memory"]
category = "algorithm"
expected_gain = "wgmma grouped GEMMs instead of mma.sync, persistent blocks, and the combine folded into the second GEMM's epilogue (no fp32 per-pair intermediate written and read back)"
pitfalls = ["rows gathered by token cannot come through TMA on Hopper: cp.async them in the 128-byte swizzle wgmma reads, and let each producer thread wait for its own copies and fence them (fence.proxy.async) before it arrives on the stage's barrier", "a stage barrier counts the copy engine's bytes and every producer thread's arrival: init it with 128 + 1", "z = silu(g)·u enters the second GEMM as a bf16 hi + lo pair (one bf16 pass fails rel_l2 1e-4)", "with atomic reductions into out the result differs bit for bit between runs: say nondeterministic = true in the plan, and zero out first", "three stages at least: the producer arrives one stage late, two stages deadlock"]
[measured]
s_op = 0.4113
baseline_s_op = 0.135
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.401, every shape passing at the strict level (docs/measurements/bench-best-fused_moe.json).
// Then (H200, 2026-12-03, `bench --full`, second-round harness, every shape strict on 5 seeds): S_op 0.411 (from 0.401) with gemm2 taking 128-column items where few rows are routed (T·K ≤ NARROW = 1024: moe_gemm2_narrow, the same body with one W2 tile per stage). The E = 8 shapes of 135 and 277 tokens had 88 and 104 items of 256 columns for 132 SMs; per shape 0 0.405 → 0.467, 1 0.400 → 0.452, 8 0.254 → 0.271, the others as before (`bench --sweep NARROW=1024,0`, quick: 0.4014 against 0.3973). Shapes 0 and 1 now sit above the median, which moves to shape 14. `measure --session sessions/fused-moe-wgmma.jsonl` v4: 0.412, accepted by the auto rule. A sweep of BN2 × STAGES1 (quick, all four combinations, one kernel for all shapes): 0.408 / 0.393 / 0.407 / 0.383, best per shape 0.412; STAGES1 = 3 on shape 3 is noise (0.24-0.35 across runs of the same kernel).
/* atrex:plan
nondeterministic = true        # the combine adds into out with atomic reductions, in any order
[[tensor_map]]
name = "tm_w1"                 # W1 as [E·2I rows, H]: one box = 128 rows × 64 k
tensor = "w1"
dtype = "bf16"
dims = ["H", "E * 2 * I"]
box = ["64", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[tensor_map]]
name = "tm_zhi"                # z (hi part) as [pairs, I]
tensor = "z_hi"
dtype = "bf16"
dims = ["I", "T * min(K, E)"]
box = ["64", "128"]
swizzle = "128B"

[[tensor_map]]
name = "tm_zlo"
tensor = "z_lo"
dtype = "bf16"
dims = ["I", "T * min(K, E)"]
box = ["64", "128"]
swizzle = "128B"

[[tensor_map]]
name = "tm_w2"                 # W2 as [E·H rows, I]
tensor = "w2"
dtype = "bf16"
dims = ["I", "E * H"]
box = ["64", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[launch]]
kernel = "moe_route"
grid = ["E"]
block = [1024]
args = ["topk_ids", "topk_weights", "tok", "wgt", "slot_pos", "cnt", "T:i32", "K:i32"]

[[launch]]
kernel = "moe_schedule"
grid = [1]
block = [1024]
args = ["cnt", "off", "tiles", "E:i32"]

[[launch]]
kernel = "moe_gemm1_wgmma"
grid = ["min(132, (ceil(T * min(K, E) / 128) + E) * (I / 128))"]
block = [384]
smem = "1024 + STAGES1 * 49152 + 256"
args = ["hidden_states", "tm_w1", "tok", "cnt", "off", "tiles", "z_hi", "z_lo", "T:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "moe_zero"
grid = ["ceil(T * H / 4 / 256)"]
block = [256]
args = ["out", "T * H / 4:i64"]

[[launch]]
kernel = "moe_gemm2_wgmma"
when = "T * min(K, E) > NARROW"
grid = ["min(132, (ceil(T * min(K, E) / 128) + E) * (H / BN2))"]
block = [384]
smem = "1024 + STAGES2 * (2 + BN2 / 128) * 16384 + 256"
args = ["tm_zhi", "tm_zlo", "tm_w2", "cnt", "off", "tiles", "tok", "wgt", "out", "T:i32", "H:i32", "I:i32"]

# Few routed rows (T·K up to NARROW): 128-column items, twice as many, so that the few row
# tiles still give every SM an item (the E = 8 shapes of 135 and 277 tokens: 88 and 104 items
# of 256 columns for 132 SMs).
[[launch]]
kernel = "moe_gemm2_narrow"
when = "T * min(K, E) <= NARROW"
grid = ["min(132, (ceil(T * min(K, E) / 128) + E) * (H / 128))"]
block = [384]
smem = "1024 + STAGES2 * 3 * 16384 + 256"
args = ["tm_zhi", "tm_zlo", "tm_w2", "cnt", "off", "tiles", "tok", "wgt", "out", "T:i32", "H:i32", "I:i32"]

[[scratch]]
name = "tok"
dtype = "int32"
size = "E * T"

[[scratch]]
name = "wgt"
dtype = "fp32"
size = "E * T"

[[scratch]]
name = "slot_pos"
dtype = "int32"
size = "T * K"

[[scratch]]
name = "cnt"
dtype = "int32"
size = "E"

[[scratch]]
name = "off"
dtype = "int32"
size = "E + 1"

[[scratch]]
name = "tiles"
dtype = "int32"
size = "2 * (ceil(T * min(K, E) / 128) + E) + 1"

[[scratch]]
name = "z_hi"
dtype = "bf16"
size = "T * min(K, E) * I"

[[scratch]]
name = "z_lo"
dtype = "bf16"
size = "T * min(K, E) * I"


[tune]
STAGES1 = [4, 3]
STAGES2 = [3, 2]
BN2 = [256, 128]
NARROW = [1024, 0]   # routed rows (T·K) up to which gemm2 takes 128-column items (0: never)
*/
// fused_moe on Hopper (needs I % 128 == 0, H % 256 == 0 (BN2), as in every shape).
// 1. route (block per expert, ordered compaction; duplicate slots of a row merged, weights
//    added) as in the baseline; 2. schedule: a block scan of the experts' row and tile counts
//    (offsets and the list of 128-row tiles; the baseline's one-thread loop costs a dependent
//    global round trip per expert);
// 3. zero out; 4. gemm1 and 5. gemm2, persistent (one block per SM walks (row tile, column
//    tile) items; stage and phase counters run on across items, so the producer fills the next
//    item's stages while the consumers finish this one). A block is 3 warpgroups: a producer
//    (setmaxnreg 40) and two consumers of 64 rows each (setmaxnreg 232), wgmma m64n128k16 bf16
//    → fp32 from shared memory (128-byte swizzle, K-major; exact bf16 products).
// gemm1: 128 routed rows × 128 z columns; B = 128 gate rows + the matching 128 up rows of W1[e]
//   (TMA). The rows of x are gathered by token with cp.async (16 B, written in the swizzle;
//   rows past the expert's count zero-filled); a stage is full when the copy engine's bytes and
//   all 128 producer threads have arrived (each waits for its own copies one stage late and
//   fences them into the async proxy). Epilogue: z = silu(g)·u as a two-term bf16 split.
// gemm2: 128 rows × BN2 H columns, K = I twice (z hi, then z lo, against the same W2 tile; all
//   TMA). Epilogue: out[token] += ω · y with red.global.add.v2.f32 — no fp32 [pairs, H]
//   intermediate written and read back (the baseline's combine).
//
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 23/23 shapes strict on 5 seeds, max |err|
// 5e-7): S_op 0.402 against the baseline's 0.135 (docs/measurements/bench-best-fused_moe.json;
// the path in sessions/fused-moe-wgmma.jsonl). On the way (full): these GEMMs non-persistent with
// the baseline's fp32 per-pair intermediate and combine 0.342, persistent 0.348, the combine
// folded into gemm2 and the scanned schedule 0.402 — the E = 128 shapes gain most: their
// intermediate was a 6 GB round trip on shape 14. Profile (shape 14, the largest): gemm1 and
// gemm2 3.5 and 3.6 ms, tensor pipe 75 % and 70 %, compute-bound; gemm2 writes 2.8 GB for a
// 0.38 GB output (the reductions evict and refetch out's lines). Shapes 8 (one token), 18 and
// 2 stay lowest (0.25-0.33): few rows per expert leave 128-row tiles mostly empty.
#include <cuda_bf16.h>
typedef unsigned int u32;
typedef unsigned long long u64;
typedef __nv_bfloat16 bf16;
#define BM 128

#ifndef STAGES1
#define STAGES1 4
#endif
#ifndef BN2
#define BN2 256
#endif
static_assert(STAGES1 >= 3, "gemm1's producer arrives one stage late: two stages deadlock");
#ifndef STAGES2
#define STAGES2 3
#endif

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ int block_excl_scan(bool flag, int* warp_tot, int* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const unsigned b = __ballot_sync(0xffffffffu, flag);
    const int pre = __popc(b & ((1u << lane) - 1u));
    if (lane == 0) warp_tot[warp] = __popc(b);
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int w = 0; w < nw; ++w) { const int c = warp_tot[w]; warp_tot[w] = s; s += c; }
        *total = s;
    }
    __syncthreads();
    return warp_tot[warp] + pre;
}

extern "C" __global__ void moe_route(const int* __restrict__ ids, const float* __restrict__ w,
                                     int* tok, float* wgt, int* slot_pos, int* cnt, int T, int K) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    int base = 0;
    for (int t0 = 0; t0 < T; t0 += blockDim.x) {
        const int t = t0 + threadIdx.x;
        int first = -1;
        float om = 0.0f;
        if (t < T) {
            for (int k = 0; k < K; ++k) {
                if (ids[(long long)t * K + k] == e) {
                    if (first < 0) { first = k; om = w[(long long)t * K + k]; }
                    else { om += w[(long long)t * K + k]; slot_pos[(long long)t * K + k] = -1; }
                }
            }
        }
        const int r = block_excl_scan(first >= 0, warp_tot, &total);
        if (first >= 0) {
            tok[(long long)e * T + base + r] = t;
            wgt[(long long)e * T + base + r] = om;
            slot_pos[(long long)t * K + first] = base + r;
        }
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) cnt[e] = base;
}

// tiles[0] = number of tiles; tiles[1 + 2i] = expert, tiles[2 + 2i] = first row. One block:
// each thread takes one expert of a chunk of blockDim.x, scans (row count, tile count) across
// the block and writes its expert's offset and tiles (a serial loop over E costs one dependent
// global round trip per expert: tens of microseconds at E = 128-256).
__device__ __forceinline__ int2 warp_incl_scan2(int2 v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int a = __shfl_up_sync(0xffffffffu, v.x, d), b = __shfl_up_sync(0xffffffffu, v.y, d);
        if (lane >= d) { v.x += a; v.y += b; }
    }
    return v;
}

extern "C" __global__ void moe_schedule(const int* __restrict__ cnt, int* __restrict__ off, int* __restrict__ tiles, int E) {
    __shared__ int2 wsum[32];
    __shared__ int2 carry;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (threadIdx.x == 0) carry = make_int2(0, 0);
    __syncthreads();
    for (int e0 = 0; e0 < E; e0 += blockDim.x) {
        const int e = e0 + threadIdx.x;
        const int c = e < E ? cnt[e] : 0;
        const int2 own = make_int2(c, (c + BM - 1) / BM);
        const int2 inc = warp_incl_scan2(own);
        if (lane == 31) wsum[warp] = inc;
        __syncthreads();
        if (warp == 0) {
            int2 w = lane < nw ? wsum[lane] : make_int2(0, 0);
            const int2 wi = warp_incl_scan2(w);
            if (lane < nw) wsum[lane] = make_int2(wi.x - w.x, wi.y - w.y);  // exclusive
        }
        __syncthreads();
        const int2 base = carry;
        const int rows0 = base.x + wsum[warp].x + inc.x - own.x;
        const int tile0 = base.y + wsum[warp].y + inc.y - own.y;
        if (e < E) {
            off[e] = rows0;
            for (int i = 0; i < own.y; ++i) {
                tiles[1 + 2 * (tile0 + i)] = e;
                tiles[2 + 2 * (tile0 + i)] = i * BM;
            }
        }
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry = make_int2(rows0 + own.x, tile0 + own.y);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        off[E] = carry.x;
        tiles[0] = carry.y;
    }
}

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}
__device__ __forceinline__ void tma_load_2d(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// K-major operand, 128-byte swizzle: rows of 128 bytes, 8-row groups 1024 bytes apart.
__device__ __forceinline__ u64 desc128(u32 addr) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// d += A·Bᵀ for a 64×16 A and a 128×16 B, both K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 da, u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void red_add2(float* p, float a, float b) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }

constexpr u32 TILE = 128 * 128;  // bytes of one 128-row × 64-column bf16 tile

// Persistent: one block per SM walks the (row tile, column tile) items with a stride of gridDim.x,
// column tiles of a row tile adjacent; stage and phase counters run on across items, so the
// producer fills the next item's stages while the consumers store this one's.
extern "C" __global__ void __launch_bounds__(384, 1) moe_gemm1_wgmma(
    const bf16* __restrict__ x, const __grid_constant__ TensorMap tm_w1, const int* __restrict__ tok,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles,
    bf16* __restrict__ z_hi, bf16* __restrict__ z_lo, int T, int H, int I) {
    const int ncol = I / 128, items = tiles[0] * ncol;
    extern __shared__ unsigned char smem_raw[];
    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    constexpr u32 STAGE = 3 * TILE;  // A (128 rows), B gate (128 rows), B up (128 rows)
    const u32 bars = base + STAGES1 * STAGE;
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES1 + s); };
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES1; ++s) {
            mbar_init(full(s), 128 + 1);
            mbar_init(empty(s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        fence_async();
    }
    __syncthreads();
    const int nK = H / 64;
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const int t = threadIdx.x, j = t % 8;
        const u32 dst0 = (t / 8) * 128 + ((j ^ ((t / 8) % 8)) * 16);
        int it = 0;
        for (int item = blockIdx.x; item < items; item += gridDim.x) {
            const int rt = item / ncol, j0 = (item % ncol) * 128;
            const int e = tiles[1 + 2 * rt], m0 = tiles[2 + 2 * rt];
            const int rows = cnt[e];
            // Rows t/8 + 16q, 16-byte chunk j of each 64-column slice.
            const bf16* src[8];
            bool ok[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int r = t / 8 + 16 * q;
                ok[q] = m0 + r < rows;
                src[q] = x + (ok[q] ? (long long)tok[(long long)e * T + m0 + r] * H : 0) + j * 8;
            }
            const int wrow = e * 2 * I + j0;
            for (int g = 0; g < nK; ++g, ++it) {
                const int s = it % STAGES1;
                if (it >= STAGES1) mbar_wait(empty(s), ((it / STAGES1) - 1) & 1);
                const u32 st = base + s * STAGE;
                if (t == 0) {
                    mbar_expect_tx(full(s), 2 * TILE);
                    tma_load_2d(st + TILE, &tm_w1, g * 64, wrow, full(s));
                    tma_load_2d(st + 2 * TILE, &tm_w1, g * 64, wrow + I, full(s));
                }
#pragma unroll
                for (int q = 0; q < 8; ++q) cp_async16(st + dst0 + q * 16 * 128, src[q] + g * 64, ok[q]);
                cp_commit();
                // This thread's copies of the previous stage have landed: make them visible to
                // the tensor cores (async proxy) and count them.
                if (it >= 1) {
                    cp_wait<1>();
                    fence_async();
                    mbar_arrive(full((it - 1) % STAGES1));
                }
            }
        }
        if (it >= 1) {
            cp_wait<0>();
            fence_async();
            mbar_arrive(full((it - 1) % STAGES1));
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int cw = wg - 1, t = threadIdx.x - 128 * wg;
        const int warp = t / 32, lane = t % 32, c = lane % 4;
        const int rl = cw * 64 + warp * 16 + lane / 4;
        int it = 0;
        for (int item = blockIdx.x; item < items; item += gridDim.x) {
            const int rt = item / ncol, j0 = (item % ncol) * 128;
            const int e = tiles[1 + 2 * rt], m0 = tiles[2 + 2 * rt];
            const int rows = cnt[e];
            float ag[64], au[64];
#pragma unroll
            for (int i = 0; i < 64; ++i) { ag[i] = 0.0f; au[i] = 0.0f; }
            for (int g = 0; g < nK; ++g, ++it) {
                const int s = it % STAGES1;
                mbar_wait(full(s), (it / STAGES1) & 1);
                const u32 st = base + s * STAGE;
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    const u64 da = desc128(st + cw * 64 * 128 + kk * 32);
                    wgmma_ss(ag, da, desc128(st + TILE + kk * 32));
                    wgmma_ss(au, da, desc128(st + 2 * TILE + kk * 32));
                }
                wg_commit();
                wg_wait<1>();
                if (g >= 1) mbar_arrive(empty((it - 1) % STAGES1));
            }
            wg_wait<0>();
            fence_regs(ag);
            fence_regs(au);
            mbar_arrive(empty((it - 1) % STAGES1));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = m0 + rl + 8 * h;
                if (m >= rows) continue;
                const long long p = (long long)off[e] + m;
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    const int zc = j0 + 8 * i + 2 * c;
                    const float z0 = silu_f(ag[4 * i + 2 * h]) * au[4 * i + 2 * h];
                    const float z1 = silu_f(ag[4 * i + 2 * h + 1]) * au[4 * i + 2 * h + 1];
                    const __nv_bfloat162 hi = __floats2bfloat162_rn(z0, z1);
                    const float2 hf = __bfloat1622float2(hi);
                    const __nv_bfloat162 lo = __floats2bfloat162_rn(z0 - hf.x, z1 - hf.y);
                    *reinterpret_cast<__nv_bfloat162*>(z_hi + p * I + zc) = hi;
                    *reinterpret_cast<__nv_bfloat162*>(z_lo + p * I + zc) = lo;
                }
            }
        }
    }
}

// gemm2: NB2 × 128 output columns per item (moe_gemm2_wgmma: BN2 = 128 or 256;
// moe_gemm2_narrow: 128).
template <int NB2>
__device__ __forceinline__ void moe_gemm2_body(
    const TensorMap* tm_zhi_p, const TensorMap* tm_zlo_p, const TensorMap* tm_w2_p,
    const int* __restrict__ cnt, const int* __restrict__ off, const int* __restrict__ tiles,
    const int* __restrict__ tok, const float* __restrict__ wgt, float* __restrict__ out, int T,
    int H, int I) {
    constexpr int BN = NB2 * 128;
    const TensorMap &tm_zhi = *tm_zhi_p, &tm_zlo = *tm_zlo_p, &tm_w2 = *tm_w2_p;
    const int ncol = H / BN, items = tiles[0] * ncol;
    extern __shared__ unsigned char smem_raw[];
    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    constexpr u32 STAGE = (2 + NB2) * TILE;  // z hi, z lo (128 rows each), W2 (BN rows)
    const u32 bars = base + STAGES2 * STAGE;
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES2 + s); };
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES2; ++s) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        fence_async();
    }
    __syncthreads();
    const int nK = I / 64;
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int item = blockIdx.x; item < items; item += gridDim.x) {
                const int rt = item / ncol, n0 = (item % ncol) * BN;
                const int e = tiles[1 + 2 * rt], m0 = tiles[2 + 2 * rt];
                const int p0 = off[e] + m0, wrow = e * H + n0;
                for (int g = 0; g < nK; ++g, ++it) {
                    const int s = it % STAGES2;
                    if (it >= STAGES2) mbar_wait(empty(s), ((it / STAGES2) - 1) & 1);
                    const u32 st = base + s * STAGE;
                    mbar_expect_tx(full(s), STAGE);
                    tma_load_2d(st, &tm_zhi, g * 64, p0, full(s));
                    tma_load_2d(st + TILE, &tm_zlo, g * 64, p0, full(s));
#pragma unroll
                    for (int b = 0; b < NB2; ++b) tma_load_2d(st + (2 + b) * TILE, &tm_w2, g * 64, wrow + 128 * b, full(s));
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int cw = wg - 1, t = threadIdx.x - 128 * wg;
        const int warp = t / 32, lane = t % 32, c = lane % 4;
        const int rl = cw * 64 + warp * 16 + lane / 4;
        int it = 0;
        for (int item = blockIdx.x; item < items; item += gridDim.x) {
            const int rt = item / ncol, n0 = (item % ncol) * BN;
            const int e = tiles[1 + 2 * rt], m0 = tiles[2 + 2 * rt];
            const int rows = cnt[e];
            float acc[NB2][64];
#pragma unroll
            for (int b = 0; b < NB2; ++b)
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[b][i] = 0.0f;
            for (int g = 0; g < nK; ++g, ++it) {
                const int s = it % STAGES2;
                mbar_wait(full(s), (it / STAGES2) & 1);
                const u32 st = base + s * STAGE;
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    const u64 dh = desc128(st + cw * 64 * 128 + kk * 32);
                    const u64 dl = desc128(st + TILE + cw * 64 * 128 + kk * 32);
#pragma unroll
                    for (int b = 0; b < NB2; ++b) wgmma_ss(acc[b], dh, desc128(st + (2 + b) * TILE + kk * 32));
#pragma unroll
                    for (int b = 0; b < NB2; ++b) wgmma_ss(acc[b], dl, desc128(st + (2 + b) * TILE + kk * 32));
                }
                wg_commit();
                wg_wait<1>();
                if (g >= 1) mbar_arrive(empty((it - 1) % STAGES2));
            }
            wg_wait<0>();
#pragma unroll
            for (int b = 0; b < NB2; ++b) fence_regs(acc[b]);
            mbar_arrive(empty((it - 1) % STAGES2));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (m0 + rl + 8 * h >= rows) continue;
                const long long q = (long long)e * T + m0 + rl + 8 * h;
                const float w = wgt[q];
                float* orow = out + (long long)tok[q] * H + n0 + 2 * c;
#pragma unroll
                for (int b = 0; b < NB2; ++b)
#pragma unroll
                    for (int i = 0; i < 16; ++i)
                        red_add2(orow + 128 * b + 8 * i, w * acc[b][4 * i + 2 * h], w * acc[b][4 * i + 2 * h + 1]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(384, 1) moe_gemm2_wgmma(
    const __grid_constant__ TensorMap tm_zhi, const __grid_constant__ TensorMap tm_zlo,
    const __grid_constant__ TensorMap tm_w2, const int* __restrict__ cnt, const int* __restrict__ off,
    const int* __restrict__ tiles, const int* __restrict__ tok, const float* __restrict__ wgt,
    float* __restrict__ out, int T, int H, int I) {
    moe_gemm2_body<BN2 / 128>(&tm_zhi, &tm_zlo, &tm_w2, cnt, off, tiles, tok, wgt, out, T, H, I);
}

extern "C" __global__ void __launch_bounds__(384, 1) moe_gemm2_narrow(
    const __grid_constant__ TensorMap tm_zhi, const __grid_constant__ TensorMap tm_zlo,
    const __grid_constant__ TensorMap tm_w2, const int* __restrict__ cnt, const int* __restrict__ off,
    const int* __restrict__ tiles, const int* __restrict__ tok, const float* __restrict__ wgt,
    float* __restrict__ out, int T, int H, int I) {
    moe_gemm2_body<1>(&tm_zhi, &tm_zlo, &tm_w2, cnt, off, tiles, tok, wgt, out, T, H, I);
}

extern "C" __global__ void moe_zero(float4* __restrict__ out, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n4) out[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}
