/* atrex:template
id = "tpl-attention-forward-wgmma"
title = "Varlen bidirectional attention on Hopper: FA3-style warp specialisation, TMA, wgmma, fp16 P"
operator = "attention_forward"
architectures = ["hopper"]
families = ["attention"]
bottlenecks = ["compute"]
category = "algorithm"
expected_gain = "tensor cores through wgmma (both GEMMs) with a producer warpgroup keeping K/V tiles in flight through TMA while two consumer warpgroups compute"
pitfalls = ["wgmma descriptors must match the tensor map's swizzle (128-byte: SBO 1024; 32-byte: SBO 256) and tiles must start 1024-byte aligned", "head size 72: a 64-column 128-byte-swizzled part and a 16-column 32-byte-swizzled tail (padding to 128 would waste 44 % of the work; a 32-byte swizzle throughout halves wgmma's shared-memory rate)", "a single bf16 P loses ~8 bits of each probability: fp16 P (V converted to fp16 by the producer) keeps the strict tolerance with one P·V", "read accumulators only after wgmma.wait_group and fence them (an empty asm with +f)"]
[measured]
s_op = 0.2448
baseline_s_op = 0.124
gpu = "NVIDIA H200"
date = "2026-12-01"
mode = "full"
*/
/* atrex:plan
# q, k and v are [T, H, D]: one box is a 128-row band of one head, CE columns wide.
[[tensor_map]]
name = "tm_q128"
tensor = "q"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["64", "1", "128"]
swizzle = "128B"

[[tensor_map]]
name = "tm_k128"
tensor = "k"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["64", "1", "128"]
swizzle = "128B"
l2_promotion = "256B"

[[tensor_map]]
name = "tm_v128"
tensor = "v"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["64", "1", "128"]
swizzle = "128B"
l2_promotion = "256B"

# Head size 72: the 16 columns after the first 64 come through these maps, 32-byte swizzled,
# so that the head is padded to 80 instead of 128.
[[tensor_map]]
name = "tm_q32"
tensor = "q"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["16", "1", "128"]
swizzle = "32B"

[[tensor_map]]
name = "tm_k32"
tensor = "k"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["16", "1", "128"]
swizzle = "32B"
l2_promotion = "256B"

[[tensor_map]]
name = "tm_v32"
tensor = "v"
dtype = "bf16"
dims = ["D", "H", "T"]
strides = ["D * 2", "H * D * 2"]
box = ["16", "1", "128"]
swizzle = "32B"
l2_promotion = "256B"

[[launch]]
kernel = "attention_forward_wgmma"
grid = ["ceil(max(seq_lens) / 128)", "H", "n"]
block = ["384"]
smem = "1280 + 256 * (16 * ceil(D / 16)) + 4 * STAGES * 128 * (16 * ceil(D / 16))"
args = ["out", "tm_q128", "tm_k128", "tm_v128", "tm_q32", "tm_k32", "tm_v32",
        "cu_seqlens_q", "cu_seqlens_k", "H:i32", "D:i32"]

[tune]
STAGES = [2, 3, 1]
*/
// attention_forward on Hopper: FlashAttention-3-style warp specialisation over packed varlen
// sequences, no mask (bidirectional attention).
//
// One block = 128 query rows of one (sequence, head); 3 warpgroups. Warpgroup 0 is the producer
// (setmaxnreg 40): one warp issues TMA copies of the Q band and of each 128-key K and V tile into
// STAGES shared-memory stages (keys past the sequence are masked); then all four producer warps
// convert the V tile from bf16 to fp16 in place. Warpgroups 1 and 2 are consumers (setmaxnreg
// 232), 64 rows each: S = Q·Kᵀ with wgmma m64n128k16 (bf16, both operands from shared memory,
// 128-byte swizzle, plus a 32-byte-swizzled 16-column tail for head sizes 72 and 80); online
// softmax in fp32 registers (the length mask as one compare and select per score on the last
// tile only, four partial maxima per row, the 1/√D scale folded into the exponent's FMA,
// ex2.approx, O rescaled only when a row's maximum moved); P converted to fp16 straight from the
// accumulator layout into wgmma A fragments, O += P·V with wgmma (V N-major from shared memory,
// fp16). P in fp16 (11-bit significand) instead of bf16 keeps the strict tolerance without a
// second P·V. V is converted to fp16: exact for |v| in [6e-5, 65504] (this operator's V is
// N(0,1)).
//
// Measured (NVIDIA H200, 2026-12-01, `bench --full`, 21/21 shapes pass strict on 5 seeds):
// S_op 0.245 against the baseline's 0.124 (docs/measurements/bench-best-attention_forward.json;
// sessions/attention-forward-wgmma.jsonl ends at 0.218). The lean softmax (the same change as in
// tpl-unified-attention-wgmma, where a profile showed the softmax at 800 instructions per warp
// and tile: exp2f's range checks and a branch per element for the mask) took it from 0.218:
// +11-16 % on every shape. Head size 128: 0.44-0.46; head size 72: 0.23-0.27, where the
// exponentials (MUFU ex2, 16 per cycle per SM) weigh more against the smaller GEMMs. The
// persistent variant of the unified_attention template was 5 % slower here before its rewrite
// (every shape is one sequence; nothing to hide). Next: the unified template's merged turn (this
// tile's P·V with the next tile's S) without ping-pong at head size 72.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef STAGES
#define STAGES 2
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
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, int c0, int c1, int c2,
                                            u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
        "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
// Shared-memory matrix descriptor: start, leading and stride byte offsets, swizzle mode.
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
// Keeps the compiler from moving accumulator reads across the asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// 2^x on the special-function unit; subnormal results flush to zero (they add nothing to a sum
// of terms of which the largest is 1).
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ u32 pack_half2(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<u32*>(&v);
}

__device__ __forceinline__ void wgmma_ss(float (&d)[32], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[8], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[96], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[128], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}


// DM: head columns in 64-column chunks with the 128-byte swizzle; DT: 0 or a 16-column tail
// chunk with the 32-byte swizzle (head sizes 72 and 80: 64 + 16, so that they are padded to 80,
// not 128, and most of the work keeps the conflict-free 128-byte layout); BN: keys per KV tile; PAGED: K/V rows come from a paged cache through a block table (one
// 16-token page per box), else from packed [T, H, D] rows (one box per tile and chunk).
// kv_info: PAGED: seqused_k (KV length per sequence); packed: cu_seqlens_k.
template <int DM, int DT, int BN, bool PAGED>
__device__ __forceinline__ void attention_body(
    __nv_bfloat16* __restrict__ out, const TensorMap* tm_q, const TensorMap* tm_k,
    const TensorMap* tm_v, const TensorMap* tm_q_tail, const TensorMap* tm_k_tail,
    const TensorMap* tm_v_tail, const int* __restrict__ cu_seqlens_q, const int* __restrict__ kv_info,
    const int* __restrict__ block_table, int Hq, int Hk, int D, int MB, int NB) {
    constexpr int DP = DM + DT;          // padded head size
    constexpr int NCM = DM / 64;         // 128-byte-swizzled chunks
    constexpr int NCP = NCM + (DT ? 1 : 0);  // copies per box row (chunks + tail)
    constexpr int BQ = 128;              // query rows per block
    constexpr int PAGE = 16;             // tokens per cache block
    constexpr int NBOX = PAGED ? BN / PAGE : 1;    // copies per KV tile and chunk
    constexpr int BOXROWS = PAGED ? PAGE : BN;
    constexpr u32 QCH = BQ * 128;        // bytes of one Q chunk (the tail: BQ * 32)
    constexpr u32 KCH = BN * 128;        // bytes of one K (or V) chunk (the tail: BN * 32)
    constexpr u32 TILE = BN * DP * 2;    // bytes of one K (or V) stage

    extern __shared__ unsigned char smem_raw[];
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;  // swizzled tiles need 1024-byte alignment
    const u32 sQ = base;
    const u32 sK = sQ + BQ * DP * 2;
    const u32 sV = sK + STAGES * TILE;
    const u32 bars = sV + STAGES * TILE;       // 8 bytes each
    const u32 q_full = bars;
    auto k_full = [&](int s) { return bars + 8u * (1 + s); };
    auto v_load = [&](int s) { return bars + 8u * (1 + STAGES + s); };
    auto v_ready = [&](int s) { return bars + 8u * (1 + 2 * STAGES + s); };
    auto empty = [&](int s) { return bars + 8u * (1 + 3 * STAGES + s); };
    unsigned char* gen_base = smem_raw + (base - raw);  // generic pointer to sQ

    const int seq = blockIdx.z, h = blockIdx.y;
    const int q0 = cu_seqlens_q[seq];
    const int q_len = cu_seqlens_q[seq + 1] - q0;
    const int kv_base = PAGED ? 0 : kv_info[seq];
    const int kv_len = PAGED ? kv_info[seq] : kv_info[seq + 1] - kv_base;
    // Paged (unified attention): causal, top-left aligned, exactly when q_len == kv_len.
    // Packed (attention_forward): never masked.
    const bool causal = PAGED && (q_len == kv_len);
    const int r0 = (gridDim.x - 1 - blockIdx.x) * BQ;  // the longest causal rows first
    if (q_len <= 0 || r0 >= q_len) return;
    const int g = h / (Hq / Hk);
    const int* bt = PAGED ? block_table + (long long)seq * MB : block_table;
    const int kv_end = causal ? min(kv_len, r0 + BQ) : kv_len;
    const int ntiles = (kv_end + BN - 1) / BN;
    const int used_pages = (kv_len + PAGE - 1) / PAGE;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(k_full(s), 1);
            mbar_init(v_load(s), 1);
            mbar_init(v_ready(s), 128);
            mbar_init(empty(s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        // ---------------- producer ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const int pt = threadIdx.x, lane = pt % 32, pw = pt / 32;
        if (pw == 0) {
            if (lane == 0) mbar_expect_tx(q_full, BQ * DP * 2);
            __syncwarp();
            for (int c = lane; c < NCP; c += 32) {
                if (c < NCM) tma_load_3d(sQ + c * QCH, tm_q, c * 64, h, q0 + r0, q_full);
                else tma_load_3d(sQ + NCM * QCH, tm_q_tail, DM, h, q0 + r0, q_full);
            }
        }
        for (int j = 0; j < ntiles; ++j) {
            const int s = j % STAGES;
            if (j >= STAGES) mbar_wait(empty(s), ((j / STAGES) - 1) & 1);
            if (pw == 0) {
                if (lane == 0) {
                    mbar_expect_tx(k_full(s), TILE);
                    mbar_expect_tx(v_load(s), TILE);
                }
                __syncwarp();
                for (int t = lane; t < NBOX * NCP; t += 32) {
                    const int pb = t / NCP, c = t % NCP;
                    int row;
                    if (PAGED) {
                        const int page = j * NBOX + pb;
                        // Pages past the sequence: a row past the tensor's end reads as zeros.
                        row = page < used_pages ? bt[page] * PAGE : NB * PAGE;
                    } else {
                        row = kv_base + j * BN;  // rows past the sequence are masked
                    }
                    if (c < NCM) {
                        const u32 off = s * TILE + c * KCH + pb * BOXROWS * 128;
                        tma_load_3d(sK + off, tm_k, c * 64, g, row, k_full(s));
                        tma_load_3d(sV + off, tm_v, c * 64, g, row, v_load(s));
                    } else {
                        const u32 off = s * TILE + NCM * KCH + pb * BOXROWS * 32;
                        tma_load_3d(sK + off, tm_k_tail, DM, g, row, k_full(s));
                        tma_load_3d(sV + off, tm_v_tail, DM, g, row, v_load(s));
                    }
                }
            }
            // V to fp16 in place (every producer thread), then visible to the tensor cores.
            mbar_wait(v_load(s), (j / STAGES) & 1);
            uint4* vt = reinterpret_cast<uint4*>(gen_base + (sV - sQ) + s * TILE);
            for (int i = pt; i < (int)(TILE / 16); i += 128) {
                uint4 x = vt[i];
                u32* w = reinterpret_cast<u32*>(&x);
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    __nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162*>(&w[k]);
                    float2 f = __bfloat1622float2(b);
                    w[k] = pack_half2(f.x, f.y);
                }
                vt[i] = x;
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            mbar_arrive(v_ready(s));
        }
    } else {
        // ---------------- consumers ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int cw = wg - 1;                       // consumer warpgroup: rows cw*64 ..
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        const int R0 = r0 + cw * 64;                 // first row of this warpgroup
        const int rA = R0 + warp * 16 + lane / 4, rB = rA + 8;
        const float sl2 = 1.4426950408889634f / sqrtf((float)D);  // log2(e) / sqrt(D)

        float o[DM / 2];               // columns 0 .. DM
        float ot[DT ? DT / 2 : 1];     // the tail columns DM .. DP
#pragma unroll
        for (int i = 0; i < DM / 2; ++i) o[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < (DT ? DT / 2 : 1); ++i) ot[i] = 0.0f;
        float mA = -CUDART_INF_F, mB = -CUDART_INF_F, lA = 0.0f, lB = 0.0f;

        mbar_wait(q_full, 0);
        for (int j = 0; j < ntiles; ++j) {
            const int s = j % STAGES;
            const u32 ph = (j / STAGES) & 1;
            const int k0 = j * BN;
            const bool active = !causal || k0 <= R0 + 63;  // some key of the tile is visible
            u32 pf[BN / 16][4];
            mbar_wait(k_full(s), ph);
            if (active) {
                float sc[BN / 2];
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < DP / 16; ++kk) {
                    u64 da, db;
                    if (kk * 16 < DM) {
                        const int c = kk / 4, within = (kk % 4) * 16;
                        da = make_desc(sQ + c * QCH + cw * 64 * 128 + within * 2, 16, 1024, 1);
                        db = make_desc(sK + s * TILE + c * KCH + within * 2, 16, 1024, 1);
                    } else {
                        da = make_desc(sQ + NCM * QCH + cw * 64 * 32, 16, 256, 3);
                        db = make_desc(sK + s * TILE + NCM * KCH, 16, 256, 3);
                    }
                    wgmma_ss(sc, da, db, kk > 0 ? 1 : 0);
                }
                wg_commit();
                wg_wait0();
                fence_regs(sc);

                // Mask keys past kv_len and (causal) keys after the row — on edge tiles only, in
                // a pass of its own so that the common tile has no branch per element.
                const bool edge = (k0 + BN > kv_len) || (causal && k0 + BN - 1 > R0 + warp * 16);
                if (edge) {
                    // The last visible key of each row (kv_len - 1, and the row itself when causal),
                    // relative to this thread's first column: one compare and select per score.
                    const int c0 = k0 + 2 * (lane % 4);
                    const int tA = (causal ? min(kv_len - 1, rA) : kv_len - 1) - c0;
                    const int tB = (causal ? min(kv_len - 1, rB) : kv_len - 1) - c0;
#pragma unroll
                    for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            sc[nt * 4 + e] = nt * 8 + e > tA ? -CUDART_INF_F : sc[nt * 4 + e];
                            sc[nt * 4 + 2 + e] = nt * 8 + e > tB ? -CUDART_INF_F : sc[nt * 4 + 2 + e];
                        }
                    }
                }
                // Row maxima of the raw scores (four partial maxima per row: independent chains).
                float pa[4], pb[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) pa[i] = pb[i] = -CUDART_INF_F;
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt) {
                    pa[nt % 4] = fmaxf(pa[nt % 4], fmaxf(sc[nt * 4 + 0], sc[nt * 4 + 1]));
                    pb[nt % 4] = fmaxf(pb[nt % 4], fmaxf(sc[nt * 4 + 2], sc[nt * 4 + 3]));
                }
                float mxA = fmaxf(fmaxf(pa[0], pa[1]), fmaxf(pa[2], pa[3]));
                float mxB = fmaxf(fmaxf(pb[0], pb[1]), fmaxf(pb[2], pb[3]));
#pragma unroll
                for (int w = 1; w <= 2; w <<= 1) {
                    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, w));
                    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, w));
                }
                // m is kept in the log2 domain (scores times log2(e)/sqrt(D)); the scale is
                // positive, so it commutes with the maximum and folds into one FMA per score.
                const float nA = fmaxf(mA, mxA * sl2), nB = fmaxf(mB, mxB * sl2);
                const float bA = nA == -CUDART_INF_F ? 0.0f : nA, bB = nB == -CUDART_INF_F ? 0.0f : nB;
                const float alA = ex2_approx(mA - bA), alB = ex2_approx(mB - bB);
                mA = nA;
                mB = nB;
                float sa[2] = {0.0f, 0.0f}, sb[2] = {0.0f, 0.0f};
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt) {
                    sc[nt * 4 + 0] = ex2_approx(fmaf(sc[nt * 4 + 0], sl2, -bA));
                    sc[nt * 4 + 1] = ex2_approx(fmaf(sc[nt * 4 + 1], sl2, -bA));
                    sc[nt * 4 + 2] = ex2_approx(fmaf(sc[nt * 4 + 2], sl2, -bB));
                    sc[nt * 4 + 3] = ex2_approx(fmaf(sc[nt * 4 + 3], sl2, -bB));
                    sa[nt % 2] += sc[nt * 4 + 0] + sc[nt * 4 + 1];
                    sb[nt % 2] += sc[nt * 4 + 2] + sc[nt * 4 + 3];
                }
                lA = lA * alA + (sa[0] + sa[1]);
                lB = lB * alB + (sb[0] + sb[1]);
                // Rescale O only when some row of this warp has a new maximum (uniform per warp).
                if (__any_sync(0xffffffffu, alA != 1.0f || alB != 1.0f)) {
#pragma unroll
                    for (int i = 0; i < DM / 8; ++i) {
                        o[i * 4 + 0] *= alA;
                        o[i * 4 + 1] *= alA;
                        o[i * 4 + 2] *= alB;
                        o[i * 4 + 3] *= alB;
                    }
#pragma unroll
                    for (int i = 0; i < DT / 8; ++i) {
                        ot[i * 4 + 0] *= alA;
                        ot[i * 4 + 1] *= alA;
                        ot[i * 4 + 2] *= alB;
                        ot[i * 4 + 3] *= alB;
                    }
                }
#pragma unroll
                for (int kk = 0; kk < BN / 16; ++kk) {
                    pf[kk][0] = pack_half2(sc[(2 * kk) * 4 + 0], sc[(2 * kk) * 4 + 1]);
                    pf[kk][1] = pack_half2(sc[(2 * kk) * 4 + 2], sc[(2 * kk) * 4 + 3]);
                    pf[kk][2] = pack_half2(sc[(2 * kk + 1) * 4 + 0], sc[(2 * kk + 1) * 4 + 1]);
                    pf[kk][3] = pack_half2(sc[(2 * kk + 1) * 4 + 2], sc[(2 * kk + 1) * 4 + 3]);
                }
            }
            mbar_wait(v_ready(s), ph);
            if (active) {
                fence_regs(o);
                fence_regs(ot);
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < BN / 16; ++kk) {
                    // V is [keys][DP] in chunks of 64 columns (+ the 16-column tail): N-major B,
                    // 16 keys per step.
                    wgmma_rs(o, pf[kk], make_desc(sV + s * TILE + kk * 16 * 128, KCH, 1024, 1));
                    if constexpr (DT > 0) wgmma_rs(ot, pf[kk], make_desc(sV + s * TILE + NCM * KCH + kk * 16 * 32, BN * 32, 256, 3));
                }
                wg_commit();
                wg_wait0();
                fence_regs(o);
                fence_regs(ot);
            }
            mbar_arrive(empty(s));
        }

#pragma unroll
        for (int w = 1; w <= 2; w <<= 1) {
            lA += __shfl_xor_sync(0xffffffffu, lA, w);
            lB += __shfl_xor_sync(0xffffffffu, lB, w);
        }
        const float iA = lA > 0.0f ? 1.0f / lA : 0.0f, iB = lB > 0.0f ? 1.0f / lB : 0.0f;
        // Columns come in groups of 8 and D is a multiple of 8: the column test is per warp.
        const bool okA = rA < q_len, okB = rB < q_len;
        __nv_bfloat16* outA = out + ((long long)(q0 + rA) * Hq + h) * D + 2 * (lane % 4);
        __nv_bfloat16* outB = out + ((long long)(q0 + rB) * Hq + h) * D + 2 * (lane % 4);
#pragma unroll
        for (int nt = 0; nt < DP / 8; ++nt) {
            if (nt * 8 >= D) break;
            const float* a = nt < DM / 8 ? &o[nt * 4] : &ot[(nt - DM / 8) * 4];
            if (okA)
                *reinterpret_cast<__nv_bfloat162*>(outA + nt * 8) = __floats2bfloat162_rn(a[0] * iA, a[1] * iA);
            if (okB)
                *reinterpret_cast<__nv_bfloat162*>(outB + nt * 8) = __floats2bfloat162_rn(a[2] * iB, a[3] * iB);
        }
    }
}

extern "C" __global__ void __launch_bounds__(384, 1) attention_forward_wgmma(
    __nv_bfloat16* __restrict__ out, const __grid_constant__ TensorMap tm_q128,
    const __grid_constant__ TensorMap tm_k128, const __grid_constant__ TensorMap tm_v128,
    const __grid_constant__ TensorMap tm_q32, const __grid_constant__ TensorMap tm_k32,
    const __grid_constant__ TensorMap tm_v32, const int* __restrict__ cu_seqlens_q,
    const int* __restrict__ cu_seqlens_k, int H, int D) {
    if (D % 8 != 0) __trap();  // the epilogue writes whole groups of 8 columns
    switch ((D + 15) / 16 * 16) {
        case 64: attention_body<64, 0, 128, false>(out, &tm_q128, &tm_k128, &tm_v128, &tm_q32, &tm_k32, &tm_v32, cu_seqlens_q, cu_seqlens_k, nullptr, H, H, D, 0, 0); break;
        case 80: attention_body<64, 16, 128, false>(out, &tm_q128, &tm_k128, &tm_v128, &tm_q32, &tm_k32, &tm_v32, cu_seqlens_q, cu_seqlens_k, nullptr, H, H, D, 0, 0); break;
        case 128: attention_body<128, 0, 128, false>(out, &tm_q128, &tm_k128, &tm_v128, &tm_q32, &tm_k32, &tm_v32, cu_seqlens_q, cu_seqlens_k, nullptr, H, H, D, 0, 0); break;
        default: __trap();  // head sizes of the operator: 72, 128 (64 and 80 work too)
    }
}
