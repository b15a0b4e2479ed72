/* atrex:template
id = "tpl-block-scaled-mm-wgmma"
title = "Block-scaled FP8 GEMM on Hopper: TMA, warp specialisation, fp8 widened to f16 for wgmma, per-group promotion"
operator = "block_scaled_mm"
architectures = ["hopper"]
families = ["gemm", "quantization"]
bottlenecks = ["compute"]
category = "algorithm"
expected_gain = "wgmma at the f16 rate instead of mma.sync, with the fp8 operands widened on the fly: A straight into wgmma's register fragments, B once per block into shared memory"
pitfalls = ["the FP8 wgmma's reduced-precision accumulation exceeds the strict tolerance: widen e4m3 to f16 (exact) and use the f16 wgmma", "a k permutation inside each 16-wide step is free when A and B share it: one 4-byte shared load gives a thread the k pairs (2c, 2c+1) and (2c+8, 2c+9) of its fragment", "generic-proxy writes to shared memory (the converted B) need fence.proxy.async before wgmma reads them", "promote after every 128-wide group: acc is reset by wgmma's scale-d predicate, out += P * (a_scale * b_scale) in fp32"]
[measured]
s_op = 0.2223
baseline_s_op = 0.1142
gpu = "NVIDIA H200"
date = "2026-11-30"
mode = "full"
*/
// Measured (NVIDIA H200, 2026-11-30, `bench --full`, 24/24 shapes pass strict on 5 seeds): S_op 0.222 against the baseline's 0.114; 1.95x the baseline (docs/measurements/bench-best-block_scaled_mm.json).
/* atrex:plan
# a [M, K] and b [N, K] fp8 bytes: one box is 128 rows × one 128-byte K group.
[[tensor_map]]
name = "tm_a"
tensor = "a"
dtype = "fp8_e4m3"
dims = ["K", "M"]
box = ["128", "128"]
swizzle = "128B"

[[tensor_map]]
name = "tm_b"
tensor = "b"
dtype = "fp8_e4m3"
dims = ["K", "N"]
box = ["128", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[launch]]
kernel = "bsmm_wgmma"
grid = ["N / 128", "ceil(M / 128)"]
block = ["384"]
smem = "1024 + STAGES * 32768 + 65536 + 256"
args = ["out", "tm_a", "tm_b", "a_scales", "b_scales", "M:i32", "N:i32", "K:i32"]

[tune]
STAGES = [3, 2, 4]
*/
// block_scaled_mm on Hopper (needs N % 128 == 0, K % 128 == 0, group_n = group_k = 128, as in
// every shape). One block = a 128×128 output tile; 3 warpgroups.
//
// Warpgroup 0 is the producer (setmaxnreg 56): one thread issues TMA copies of the A and B fp8
// tiles of each 128-wide K group (128 rows × 128 bytes each, 128-byte swizzle) into STAGES
// shared-memory stages. Warpgroups 1 and 2 are consumers (setmaxnreg 224), 64 output rows each:
// - A goes straight from the fp8 stage into wgmma's register fragments: per 16-wide k step a
//   thread reads 4 bytes of each of its two rows (one conflict-free 32-bit load through the
//   swizzle) and widens them (e4m3 → f16 is exact);
// - B is widened once per block: each consumer converts 64 of the 128 rows into an f16 buffer
//   laid out for wgmma (K-major, 128-byte swizzle, two buffers so that converting group g+1
//   overlaps the tensor cores working on group g);
// - both use the same k permutation inside each 16-wide step (logical pairs (2c, 2c+1) and
//   (2c+8, 2c+9) are the physical bytes 4c..4c+3), which leaves every dot product unchanged;
// - S = 8 wgmma m64n128k16 (f16 → fp32) per group, the first with scale-d 0, then the
//   promotion out += P · (a_scale[row, g] · b_scale[n-block, g]) in fp32 registers.
// The FP8 wgmma itself would run at twice the rate but accumulates with reduced precision,
// which the strict tolerance (rel_l2 1e-5) does not allow; S is measured against the fp8 peak,
// so this kernel's ceiling is S 0.5.
//
// Measured on the way (quick, shapes 14 = 4096³ and 4 = 20480×2048×2048): S 0.227 / 0.213
// (rel_l2 1e-7); tensor pipe 50 %, 27 % of shared wavefronts bank-conflicted (the f16 B
// stores, fixed by the store order below: no change in time); STAGES 2/3/4 equal. Widening B
// in the producer warpgroup instead (consumers without a barrier between them) was slower:
// 0.193, and 0.169 with integer-only widening — one warp per SM sub-partition cannot widen B
// as fast as the tensor cores use it. Also slower (2026-12-01, quick, seven shapes, 0.222 for
// this kernel): integer widening of B (exact, as value·2^-8) 0.190, of A too 0.181; A's
// fragments double-buffered 0.209; scales loaded a group ahead 0.219; A widened into shared
// memory for an SS wgmma 0.171 — the widening itself bounds this design. A 2-CTA cluster
// sharing the widened B through distributed shared memory (each block loads half of B, its
// consumers write the f16 rows into both blocks' buffers with st.shared::cluster, 512-arrival
// full/empty mbarriers at cluster scope; 25 % less widening per consumer) measured 0.097
// (2026-12-01, quick, seven shapes; 2.3x slower: the remote 4-byte stores and the cluster-wide
// barrier per group cost more than the widening they save). The FP8 wgmma is not an option
// under the strict tolerance: its accumulator keeps 13 fraction bits and truncates (e8m13), so
// even a promotion after every k32 instruction leaves a relative error of about 2^-13/sqrt(3)
// ≈ 7e-5 per partial sum, above rel_l2 1e-5.

#include <cuda_fp8.h>
#include <cuda_fp16.h>
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef STAGES
#define STAGES 3
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
__device__ __forceinline__ uint4 lds128(u32 addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
__device__ __forceinline__ void sts128(u32 addr, u32 a, u32 b, u32 c, u32 d) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c),
                 "r"(d)
                 : "memory");
}

__device__ __forceinline__ void wgmma_rs_kmajor(float (&d)[64], const u32 (&a)[4], u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

constexpr u32 TILE8 = 128 * 128;       // bytes of one fp8 operand tile (128 rows × 128 bytes)
constexpr u32 STAGE = 2 * TILE8;       // A + B
constexpr u32 BF16BUF = 128 * 128 * 2; // one f16 B buffer: two 64-column chunks of 128 rows
constexpr u32 BCHUNK = 128 * 128;      // bytes of one 64-column f16 chunk

// Widens this consumer's 64 rows of the B stage (fp8, 128-byte swizzle) into the f16 buffer
// (128-byte swizzle, 64-column chunks) with the k permutation of the A fragments.
__device__ __forceinline__ void widen_b(u32 src, u32 dst, int cw, int t) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int u = t + 128 * q;          // 512 units of 16 bytes per consumer
        const int n = cw * 64 + u / 8, p = u % 8;
        const int j = p ^ (n % 8);          // the 16-wide k step held at position p
        const uint4 x = lds128(src + n * 128 + p * 16);
        // Physical bytes 4c..4c+3 hold the logical k pairs (2c, 2c+1) and (2c+8, 2c+9).
        const u32 lo0 = widen2(x.x), lo1 = widen2(x.y), lo2 = widen2(x.z), lo3 = widen2(x.w);
        const u32 hi0 = widen2(x.x >> 16), hi1 = widen2(x.y >> 16), hi2 = widen2(x.z >> 16),
                  hi3 = widen2(x.w >> 16);
        const int c = j / 4, u0 = 2 * (j % 4);
        const u32 row = dst + c * BCHUNK + n * 128;
        const u32 alo = row + ((u0 ^ (n % 8)) * 16), ahi = row + (((u0 + 1) ^ (n % 8)) * 16);
        // Threads of the second chunk store their other half first: the 8 threads of a store
        // phase then cover 8 different bank groups.
        if (c == 0) {
            sts128(alo, lo0, lo1, lo2, lo3);
            sts128(ahi, hi0, hi1, hi2, hi3);
        } else {
            sts128(ahi, hi0, hi1, hi2, hi3);
            sts128(alo, lo0, lo1, lo2, lo3);
        }
    }
}

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

extern "C" __global__ void __launch_bounds__(384, 1) bsmm_wgmma(
    float* __restrict__ out, const __grid_constant__ TensorMap tm_a,
    const __grid_constant__ TensorMap tm_b, const float* __restrict__ sa,
    const float* __restrict__ sb, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;  // swizzled tiles need 1024-byte alignment
    const u32 sStage = base;                   // STAGES × (A tile, B tile)
    const u32 sBf = sStage + STAGES * STAGE;   // two f16 B buffers
    const u32 bars = sBf + 2 * BF16BUF;
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
                mbar_expect_tx(full(s), STAGE);
                tma_load_2d(sStage + s * STAGE, &tm_a, g * 128, m0, full(s));
                tma_load_2d(sStage + s * STAGE + TILE8, &tm_b, g * 128, n0, full(s));
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
        widen_b(sStage + TILE8, sBf, cw, t);
        load_a(af, sStage, rl, c);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_arrive(empty(0));
        asm volatile("bar.sync 1, 256;" ::: "memory");

        for (int g = 0; g < nK; ++g) {
            const u32 buf = sBf + (g & 1) * BF16BUF;
            const float sA = saA[g], sB8 = saB[g], sbv = sbn[g];
            wg_fence();
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const u64 db = make_desc(buf + (j / 4) * BCHUNK + (j % 4) * 32, 16, 1024, 1);
                wgmma_rs_kmajor(acc, af[j], db, j > 0 ? 1 : 0);
            }
            wg_commit();
            const int g1 = g + 1, s1 = g1 % STAGES;
            if (g1 < nK) {
                mbar_wait(full(s1), (g1 / STAGES) & 1);
                widen_b(sStage + s1 * STAGE + TILE8, sBf + (g1 & 1) * BF16BUF, cw, t);
            }
            wg_wait0();
            fence_regs(acc);
            // The wgmma read af asynchronously: keep those registers untouched until here.
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(af[j][k])::"memory");
            // out += P · (a_scale · b_scale): one FMA per element (the reference's two
            // multiplies round differently by at most an ulp of fp32).
            const float fA = sA * sbv, fB = sB8 * sbv;
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                o[4 * i + 0] = fmaf(acc[4 * i + 0], fA, o[4 * i + 0]);
                o[4 * i + 1] = fmaf(acc[4 * i + 1], fA, o[4 * i + 1]);
                o[4 * i + 2] = fmaf(acc[4 * i + 2], fB, o[4 * i + 2]);
                o[4 * i + 3] = fmaf(acc[4 * i + 3], fB, o[4 * i + 3]);
            }
            if (g1 < nK) {
                load_a(af, sStage + s1 * STAGE, rl, c);
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                mbar_arrive(empty(s1));
                asm volatile("bar.sync 1, 256;" ::: "memory");
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
