/* atrex:template
id = "tpl-block-scaled-mm-wgmma"
title = "Block-scaled FP8 GEMM on Hopper: the weights widened to f16 once by a first launch, activations widened into wgmma's register fragments, TMA, warp specialisation, per-group promotion"
operator = "block_scaled_mm"
architectures = ["hopper"]
families = ["gemm", "quantization"]
bottlenecks = ["compute"]
category = "algorithm"
expected_gain = "wgmma at the f16 rate: B (the weights, N x K) widened to f16 once by a short memory-bound launch instead of by every block that reads it, so the consumers only widen their A fragments and the two consumer warpgroups run without a barrier between them"
pitfalls = ["the FP8 wgmma's reduced-precision accumulation exceeds the strict tolerance: widen e4m3 to f16 (exact) and use the f16 wgmma", "a k permutation inside each 16-wide step is free when A and B share it: one 4-byte shared load gives a thread the k pairs (2c, 2c+1) and (2c+8, 2c+9) of its fragment, so the first launch stores B's f16 in that order", "promote after every 128-wide group: acc is reset by wgmma's scale-d predicate, out += P * (a_scale * b_scale) in fp32", "an RS wgmma reads its A registers asynchronously: load the next group's fragments only after wgmma.wait_group", "two accumulator sets (to promote one group while the next runs) do not fit the 168 registers of a 384-thread block: ptxas spills and serialises the wgmma (C7514)", "widening A in the first launch as well (both operands from shared memory) costs a read and a write of an f16 copy of A: 4-7 % slower on the shapes with K = 2048"]
[measured]
s_op = 0.3087
baseline_s_op = 0.1142
gpu = "NVIDIA H200"
date = "2026-12-03"
mode = "full"
*/
// Re-measured under the second-round harness (NVIDIA H200, 2026-12-03, `bench --full`: every timed sample checked, 5 seeds and every structured draw): S_op 0.309, every shape passing at the strict level (docs/measurements/bench-best-block_scaled_mm.json).
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 24/24 shapes pass strict on 5 seeds, rel_l2 ≤ 1e-7): S_op 0.291 (0.2911) against the baseline's 0.114 and the previous kernel's 0.222 (B widened per block in shared memory); 2.55x the baseline (docs/measurements/bench-best-block_scaled_mm.json: two `bench --full --shape` runs joined by `bench --merge`). Large shapes 0.22-0.24 → 0.29-0.31 (4096³ in 250 µs, 299520 × 4096 × 4096 in 17.5 ms); small-M shapes pay the widening launch, which the previous kernel did not have: shape 12 (M = 237, N = K = 4096) 0.102 → 0.082 (44 → 55 µs). Profile (the largest shape, 23: 299520 × 4096 × 4096): the widening launch 21 µs, the GEMM 15.3 ms with the tensor pipe busy 72 %, SM 70 %, the memory system (L2 → SM) at 75 % and DRAM at 24 % (12.5 GB read: B's f16 copy, 33.5 MB, re-read from DRAM as A and the output stream through L2, which hits 81 %), 168 registers, 1 block per SM; shape 14 (4096³) alike: widening 22 µs (9 % of the time), GEMM 234 µs at 71 % tensor pipe. What is left: the per-group wgmma wait and promotion in each consumer.
/* atrex:plan
# Launch 1 widens b [N, K] (fp8 e4m3) to f16 in scratch, in the k order of the A fragments;
# launch 2 reads a (fp8) and that copy by TMA.
[[launch]]
kernel = "bsmm_widen_b"
grid = ["min(132 * WB, ceil(N * K / (16 * 256)))"]
block = [256]
args = ["b", "b16", "N * K / 16:i64"]

# A: one box is 128 rows × 128 fp8 codes; B: 128 rows × 64 f16 (128 bytes, the swizzle span),
# two boxes per K group of 128.
[[tensor_map]]
name = "tm_a"
tensor = "a"
dtype = "fp8_e4m3"
dims = ["K", "M"]
box = ["128", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[tensor_map]]
name = "tm_b"
tensor = "b16"
dtype = "fp16"
dims = ["K", "N"]
box = ["64", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[launch]]
kernel = "bsmm_wgmma"
grid = ["N / 128", "ceil(M / 128)"]
block = ["384"]
smem = "1024 + STAGES * 49152 + 256"
args = ["out", "tm_a", "tm_b", "a_scales", "b_scales", "M:i32", "N:i32", "K:i32"]

[[scratch]]
name = "b16"
dtype = "fp16"
size = "N * K"

[tune]
STAGES = [4, 3]
WB = [8, 4, 16]     # widening blocks per SM
*/
// block_scaled_mm on Hopper (needs N % 128 == 0, K % 128 == 0, group_n = group_k = 128, as in
// every shape). Launch 1 widens b (N × K e4m3, the weights) to f16 in scratch — exact — in the
// k order of wgmma's A fragments (below). Launch 2: one block = a 128×128 output tile, 3
// warpgroups. Warpgroup 0 is the producer (setmaxnreg 56): one thread issues, per 128-wide K
// group, the TMA copies of A's fp8 tile (128 rows × 128 bytes) and B's two f16 chunks (128 rows
// × 64 columns each), all with the 128-byte swizzle, into STAGES stages. Warpgroups 1 and 2 are
// consumers (setmaxnreg 224), 64 output rows each, with no barrier between them: per group a
// thread reads its A fragments from the fp8 stage (one conflict-free 4-byte load per row and k
// step, widened in registers: logical k pairs (2c, 2c+1) and (2c+8, 2c+9) are the physical bytes
// 4c..4c+3, which leaves every dot product unchanged when B is stored in the same order), runs
// 8 wgmma m64n128k16 (f16 → fp32, A from registers, B from shared memory, the first with
// scale-d 0), waits, frees the stage and promotes: out += P · (a_scale[row, g] · b_scale[n-block,
// g]) in fp32 registers. The FP8 wgmma itself would run at twice the rate but accumulates with
// reduced precision, which the strict tolerance (rel_l2 1e-5) does not allow; S is measured
// against the fp8 peak, so this kernel's ceiling is S 0.5.
//
// Measured and not kept (quick, eight shapes 4 5 7 13 14 15 18 22, this kernel 0.300 and 0.297
// in two runs): one elected arrival per consumer warp on the stage's empty barrier instead of 256
// 0.296 (equal); the two consumers taking turns to issue their wgmma (ping-pong on named
// barriers, as in the attention kernels) 0.270 — the turn barrier costs more than the overlap
// of one consumer's promotion with the other's products gains; a cluster of two row tiles
// sharing each B tile by TMA multicast (each block loads one 64-column half for both; empty
// barriers counting both blocks' consumer warps, remote arrivals through mapa) 0.249, with
// ping-pong 0.244 — B's L2 traffic is not the limit (the tensor pipe is at 71 %), and with
// cluster-scope release on those arrivals (a fence each) 0.186.
//
// History (quick mode, NVIDIA H200, 2026-12-01, eight shapes 4 5 7 13 14 15 18 22): the
// previous kernel (S_op 0.222 full) widened B per block into an f16 buffer in shared memory, the
// two consumers in lockstep (a barrier per group), tensor pipe 50 %: 0.222 on these shapes.
// Both operands widened by the first launch and read by an SS wgmma 0.263 (4096² shapes 0.25-0.29);
// B only, A widened in registers as before (this kernel) 0.275 — +7 % where K = 2048, where the
// f16 copy of A costs most; STAGES 3 0.269 against 4; a grouped block order (8 row tiles per
// group, for L2 reuse) no change. Not kept earlier (2026-12-01, quick, seven shapes, the previous
// kernel at 0.222): integer widening 0.181-0.190, A double-buffered in registers 0.209 (spills),
// scales a group ahead 0.219, A widened into shared memory 0.171, a 2-CTA cluster sharing the
// widened B over distributed shared memory 0.097. The FP8 wgmma is not an option under the strict
// tolerance: its accumulator keeps 13 fraction bits and truncates (e8m13), so even a promotion
// after every k32 instruction leaves a relative error of about 2^-13/sqrt(3) ≈ 7e-5 per partial
// sum, above rel_l2 1e-5.

#include <cuda_fp8.h>
#include <cuda_fp16.h>
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef STAGES
#define STAGES 4
#endif

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ u32 smem_u32(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
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
__device__ __forceinline__ u64 make_desc(u32 addr, u32 lbo, u32 sbo, u32 mode) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) |
           ((u64)((sbo >> 4) & 0x3FFF) << 32) | ((u64)mode << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Two e4m3 bytes (low byte first) → one f16x2 word, exactly.
__device__ __forceinline__ u32 widen2(u32 two) {
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    return (u32)h.x | ((u32)h.y << 16);
}
__device__ __forceinline__ u32 lds32(u32 addr) {
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
// Launch 1: b's e4m3 codes → f16 (exact), 16 codes (one k step) per thread, stored in the
// k order of the A fragments: logical pairs (2c, 2c+1) and (2c+8, 2c+9) are physical bytes
// 4c..4c+3, so positions 0-7 take each 32-bit word's low half and 8-15 its high half.
extern "C" __global__ void __launch_bounds__(256) bsmm_widen_b(
    const uint4* __restrict__ b, uint4* __restrict__ b16, long long n) {
    for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) {
        const uint4 x = __ldg(b + i);
        b16[2 * i] = make_uint4(widen2(x.x), widen2(x.y), widen2(x.z), widen2(x.w));
        b16[2 * i + 1] = make_uint4(widen2(x.x >> 16), widen2(x.y >> 16), widen2(x.z >> 16), widen2(x.w >> 16));
    }
}

__device__ __forceinline__ void wgmma_rs_kmajor(float (&d)[64], const u32 (&a)[4], u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

constexpr u32 CHUNK = 128 * 128;   // one box: 128 rows × 128 bytes (A: fp8; B: 64 f16)
constexpr u32 STAGE = 3 * CHUNK;   // A (fp8, k 0-127), then B (two f16 chunks)

// The A fragments of one 128-wide group for rows rl and rl + 8 of the stage.
__device__ __forceinline__ void load_a(u32 (&af)[8][4], u32 src, int rl, int c) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const u32 off = ((j ^ (rl % 8)) * 16) + 4 * c;
        const u32 x0 = lds32(src + rl * 128 + off);
        const u32 x1 = lds32(src + (rl + 8) * 128 + off);
        af[j][0] = widen2(x0);
        af[j][1] = widen2(x1);
        af[j][2] = widen2(x0 >> 16);
        af[j][3] = widen2(x1 >> 16);
    }
}


// Launch 2: one block = a 128×128 output tile; warpgroup 0 loads, warpgroups 1 and 2 compute
// 64 rows each with f16 wgmma from shared memory (both operands K-major, 128-byte swizzle).
extern "C" __global__ void __launch_bounds__(384, 1) bsmm_wgmma(
    float* __restrict__ out, const __grid_constant__ TensorMap tm_a,
    const __grid_constant__ TensorMap tm_b, const float* __restrict__ sa,
    const float* __restrict__ sb, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;  // swizzled tiles need 1024-byte alignment
    const u32 bars = base + STAGES * STAGE;
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    const int nK = K / 128;
    const int n0 = blockIdx.x * 128, m0 = blockIdx.y * 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
        if (threadIdx.x == 0) {
            for (int g = 0; g < nK; ++g) {
                const int s = g % STAGES;
                if (g >= STAGES) mbar_wait(empty(s), ((g / STAGES) - 1) & 1);
                const u32 st = base + s * STAGE;
                mbar_expect_tx(full(s), STAGE);
                tma_load_2d(st, &tm_a, g * 128, m0, full(s));
                tma_load_2d(st + CHUNK, &tm_b, g * 128, n0, full(s));
                tma_load_2d(st + 2 * CHUNK, &tm_b, g * 128 + 64, n0, full(s));
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
        const int cw = wg - 1;
        const int t = threadIdx.x - 128 * wg;
        const int warp = t / 32, lane = t % 32, c = lane % 4;
        const int rl = cw * 64 + warp * 16 + lane / 4;   // tile-local rows rl, rl + 8
        const int rowA = m0 + rl, rowB = rowA + 8;
        const float* saA = sa + (long long)min(rowA, M - 1) * nK;
        const float* saB = sa + (long long)min(rowB, M - 1) * nK;
        const float* sbn = sb + (long long)blockIdx.x * nK;

        float acc[64], o[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) o[i] = 0.0f;
        u32 af[8][4];
        mbar_wait(full(0), 0);
        load_a(af, base, rl, c);
        for (int g = 0; g < nK; ++g) {
            const int s = g % STAGES;
            const float sA = saA[g], sB8 = saB[g], sbv = sbn[g];
            const u32 st = base + s * STAGE;
            wg_fence();
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const u64 db = make_desc(st + CHUNK + (j / 4) * CHUNK + (j % 4) * 32, 16, 1024, 1);
                wgmma_rs_kmajor(acc, af[j], db, j > 0 ? 1 : 0);
            }
            wg_commit();
            wg_wait0();
            fence_regs(acc);
            // The wgmma read af asynchronously: keep those registers untouched until here.
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(af[j][k])::"memory");
            mbar_arrive(empty(s));
            const float fA = sA * sbv, fB = sB8 * sbv;
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                o[4 * i + 0] = fmaf(acc[4 * i + 0], fA, o[4 * i + 0]);
                o[4 * i + 1] = fmaf(acc[4 * i + 1], fA, o[4 * i + 1]);
                o[4 * i + 2] = fmaf(acc[4 * i + 2], fB, o[4 * i + 2]);
                o[4 * i + 3] = fmaf(acc[4 * i + 3], fB, o[4 * i + 3]);
            }
            if (g + 1 < nK) {
                const int s1 = (g + 1) % STAGES;
                mbar_wait(full(s1), ((g + 1) / STAGES) & 1);
                load_a(af, base + s1 * STAGE, rl, c);
            }
        }
        // Two consecutive fp32 per thread and row: 4 threads fill one 32-byte sector.
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int col = n0 + 8 * i + 2 * c;
            if (rowA < M)
                *reinterpret_cast<float2*>(out + (long long)rowA * N + col) =
                    make_float2(o[4 * i + 0], o[4 * i + 1]);
            if (rowB < M)
                *reinterpret_cast<float2*>(out + (long long)rowB * N + col) =
                    make_float2(o[4 * i + 2], o[4 * i + 3]);
        }
    }
}
