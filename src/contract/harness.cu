// The measurement harness's own device code: seeded input generators, the comparison of inputs
// with their pristine copies and the check of timed outputs.
// Compiled once per worker with NVRTC; no candidate code is linked with it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef unsigned long long u64;

// splitmix64 over (seed, tensor, index): a counter-based generator, so every element is
// independent of the launch configuration.
__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 rnd(u64 seed, u64 stream, u64 i) {
    return mix64(mix64(seed ^ mix64(stream * 0xD1B54A32D192ED03ull)) + i);
}

// Uniform in (0, 1): 24 random bits, never 0.
__device__ __forceinline__ float unif(u64 r) {
    return ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller from two independent uniforms.
__device__ __forceinline__ float normal(u64 seed, u64 stream, u64 i) {
    u64 r = rnd(seed, stream, i);
    float u1 = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = ((float)((r >> 16) & 0xFFFFFFull) + 0.5f) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }

// s·N(0,1) drawn in the dtype: the sample is rounded to T, then multiplied by s and rounded again.
template <typename T>
__device__ void gen_normal(T* out, u64 n, u64 seed, u64 stream, float s, float unused) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        float z = to_f<T>(from_f<T>(normal(seed, stream, i)));
        out[i] = from_f<T>(z * s);
    }
}

// T(1 + T(s·T(N(0,1)))).
template <typename T>
__device__ void gen_one_plus_normal(T* out, u64 n, u64 seed, u64 stream, float s, float unused) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        float z = to_f<T>(from_f<T>(normal(seed, stream, i)));
        float d = to_f<T>(from_f<T>(z * s));
        out[i] = from_f<T>(1.0f + d);
    }
}

template <typename T>
__device__ void gen_uniform(T* out, u64 n, u64 seed, u64 stream, float a, float b) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        out[i] = from_f<T>(a + (b - a) * unif(rnd(seed, stream, i)));
    }
}

template <typename T>
__device__ void gen_const(T* out, u64 n, u64 seed, u64 stream, float a, float b) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        out[i] = from_f<T>(a);
    }
}

// Integers uniform in [a, b).
template <typename I>
__device__ void gen_randint(I* out, u64 n, u64 seed, u64 stream, long long a, long long b) {
    u64 span = (u64)(b - a);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        out[i] = (I)(a + (long long)(rnd(seed, stream, i) % span));
    }
}

template <typename I>
__device__ void gen_arange(I* out, u64 n, u64 seed, u64 stream, long long a, long long b) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        out[i] = (I)(a + (long long)i);
    }
}

#define FLOAT_GEN(KIND, NAME, T) \
    extern "C" __global__ void gen_##KIND##_##NAME(T* out, u64 n, u64 seed, u64 stream, float a, float b) { \
        gen_##KIND<T>(out, n, seed, stream, a, b); }
#define FLOAT_GENS(KIND) FLOAT_GEN(KIND, bf16, __nv_bfloat16) FLOAT_GEN(KIND, fp16, __half) FLOAT_GEN(KIND, fp32, float)
FLOAT_GENS(normal)
FLOAT_GENS(one_plus_normal)
FLOAT_GENS(uniform)
FLOAT_GENS(const)

#define INT_GEN(KIND, NAME, I) \
    extern "C" __global__ void gen_##KIND##_##NAME(I* out, u64 n, u64 seed, u64 stream, long long a, long long b) { \
        gen_##KIND<I>(out, n, seed, stream, a, b); }
INT_GEN(randint, int32, int)
INT_GEN(randint, int64, long long)
INT_GEN(arange, int32, int)
INT_GEN(arange, int64, long long)

// ---- Structured draws: structure passes over generated inputs (src/worker/structure.rs).
// A group is `group` consecutive elements (a row: the last dimension; or a quantisation group).
// Group j is chosen when it is the draw's pick (so at least one is) or one time in 8; element i
// is an outlier when it is the pick or one time in 256. Choices depend only on (seed, salt,
// index), never on the launch. Ops: 0 chosen groups := a, 1 chosen groups ×= a,
// 2 outliers ×= a; integers: 3 every element := lo + pick mod (hi − lo), 4 x := x mod lo,
// 5 x := (m·x + c) mod lo for x in [0, lo): a bijection of [0, lo) (m odd, coprime to lo, not 1
// where lo > 3, so consecutive values land apart), values outside [0, lo) kept.
__device__ __forceinline__ bool chosen(u64 seed, u64 salt, u64 j, u64 count) {
    u64 pick = rnd(seed, salt, ~0ull) % count;
    return j == pick || (rnd(seed, salt, j) & 7ull) == 0;
}

template <typename T>
__device__ void structure_float(T* p, u64 n, u64 group, u64 seed, u64 salt, int op, float a) {
    if (group == 0) return;
    const u64 groups = (n + group - 1) / group;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        if (op == 0) {
            if (chosen(seed, salt, i / group, groups)) p[i] = from_f<T>(a);
        } else if (op == 1) {
            if (chosen(seed, salt, i / group, groups)) p[i] = from_f<T>(to_f<T>(p[i]) * a);
        } else if (op == 2) {
            u64 pick = rnd(seed, salt ^ 0x5A5Aull, ~0ull) % n;
            if (i == pick || (rnd(seed, salt ^ 0x5A5Aull, i) & 255ull) == 0) p[i] = from_f<T>(to_f<T>(p[i]) * a);
        }
    }
}

__device__ __forceinline__ u64 gcd_u64(u64 a, u64 b) {
    while (b != 0) { const u64 t = a % b; a = b; b = t; }
    return a;
}

template <typename I>
__device__ void structure_int(I* p, u64 n, u64 seed, u64 salt, int op, long long lo, long long hi) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        if (op == 3 && hi > lo) {
            p[i] = (I)(lo + (long long)(rnd(seed, salt, ~0ull) % (u64)(hi - lo)));
        } else if (op == 4 && lo > 0) {
            long long x = (long long)p[i] % lo;
            p[i] = (I)(x < 0 ? x + lo : x);
        } else if (op == 5 && lo > 0) {
            const u64 n = (u64)lo;
            u64 m = (rnd(seed, salt, ~0ull) % n) | 1ull;
            if (m == 1 && n > 3) m = 3;
            while (gcd_u64(m, n) != 1) m += 2;
            const u64 c = rnd(seed, salt, ~1ull) % n;
            const long long x = (long long)p[i];
            // n ≤ 2^31 (Pass::resolve): (m mod n)·x + c < 2^63.
            if (x >= 0 && x < lo) p[i] = (I)(long long)(((m % n) * (u64)x + c) % n);
        }
    }
}

#define STRUCTURE_FLOAT(NAME, T) \
    extern "C" __global__ void structure_##NAME(T* p, u64 n, u64 group, u64 seed, u64 salt, int op, float a) { \
        structure_float<T>(p, n, group, seed, salt, op, a); }
STRUCTURE_FLOAT(bf16, __nv_bfloat16)
STRUCTURE_FLOAT(fp16, __half)
STRUCTURE_FLOAT(fp32, float)
#define STRUCTURE_INT(NAME, I) \
    extern "C" __global__ void structure_##NAME(I* p, u64 n, u64 seed, u64 salt, int op, long long lo, long long hi) { \
        structure_int<I>(p, n, seed, salt, op, lo, hi); }
STRUCTURE_INT(int32, int)
STRUCTURE_INT(int64, long long)

// fp8 (one byte an element): chosen groups := the code `code` (op 0 only; the host encodes it).
extern "C" __global__ void structure_fp8(unsigned char* p, u64 n, u64 group, u64 seed, u64 salt, int code) {
    if (group == 0) return;
    const u64 groups = (n + group - 1) / group;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        if (chosen(seed, salt, i / group, groups)) p[i] = (unsigned char)code;
    }
}
// ---- end of structured draws.

// Where two buffers differ (the input-unchanged test: an input against the harness's pristine
// copy of it, byte for byte): out[0] += differing 8-byte words (and tail bytes), out[1] =
// max(~i) over differing words, i.e. the complement of the first differing word's index.
extern "C" __global__ void differ(const unsigned char* a, const unsigned char* b, u64 nbytes, u64* out) {
    u64 words = nbytes / 8, bad = 0, first_c = 0;
    const u64* wa = (const u64*)a;
    const u64* wb = (const u64*)b;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < words; i += (u64)gridDim.x * blockDim.x) {
        if (wa[i] != wb[i]) { ++bad; if (~i > first_c) first_c = ~i; }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (u64 i = words * 8; i < nbytes; ++i)
            if (a[i] != b[i]) { ++bad; if (~words > first_c) first_c = ~words; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        bad += __shfl_down_sync(0xffffffffu, bad, o);
        u64 f = __shfl_down_sync(0xffffffffu, first_c, o);
        first_c = f > first_c ? f : first_c;
    }
    if ((threadIdx.x & 31) == 0 && bad) {
        atomicAdd(&out[0], bad);
        atomicMax(&out[1], first_c);
    }
}

// A plain copy, for calibration: 16-byte loads and stores.
extern "C" __global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        dst[i] = src[i];
    }
}

// Tensor-core rate, for calibration: each warp issues 8 independent chains of
// mma.sync.m16n8k16 (bf16 inputs, fp32 accumulate), 4096 FLOP each, from registers only.
// The sums are stored so that nothing is optimized away. sm_80 and newer; a no-op before.
extern "C" __global__ void mma_rate(float* out, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a0 = 0x3c003c00u ^ (threadIdx.x & 7), a1 = 0x3c013c01u, a2 = 0x3bff3bffu, a3 = 0x3c023c02u;
    const unsigned b0 = 0x3a003a00u, b1 = 0x3a013a01u;
    float c[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};\n"
                : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * (u64)blockDim.x + threadIdx.x] = s;
#endif
}

// Decodes one element (little-endian bytes) of a dtype code to double:
// 0 bf16, 1 fp16, 2 fp32, 3 fp64, 4 fp8 e4m3fn, 5 fp8 e4m3fnuz, 6 int8, 7 uint8, 8 int32, 9 int64.
__device__ __forceinline__ double decode_elem(const unsigned char* p, int code) {
    switch (code) {
    case 0: return (double)__uint_as_float(((unsigned)(p[0] | (p[1] << 8))) << 16);
    case 1: { unsigned short h = (unsigned short)(p[0] | (p[1] << 8)); return (double)__half2float(*(const __half*)&h); }
    case 2: { unsigned u = p[0] | (p[1] << 8) | (p[2] << 16) | ((unsigned)p[3] << 24); return (double)__uint_as_float(u); }
    case 3: { u64 u = 0; for (int k = 7; k >= 0; --k) u = (u << 8) | p[k]; return __longlong_as_double((long long)u); }
    case 4: case 5: {
        unsigned v = p[0];
        if (code == 4 && (v & 0x7f) == 0x7f) return __longlong_as_double(0x7ff8000000000000ll);
        if (code == 5 && v == 0x80) return __longlong_as_double(0x7ff8000000000000ll);
        double sign = (v & 0x80) ? -1.0 : 1.0;
        int e = (v >> 3) & 0xf, bias = code == 4 ? 7 : 8;
        double m = (double)(v & 7);
        return e == 0 ? sign * m / 8.0 * ldexp(1.0, 1 - bias) : sign * (1.0 + m / 8.0) * ldexp(1.0, e - bias);
    }
    case 6: return (double)(signed char)p[0];
    case 7: return (double)p[0];
    case 8: return (double)(int)(p[0] | (p[1] << 8) | (p[2] << 16) | ((unsigned)p[3] << 24));
    case 9: { u64 u = 0; for (int k = 7; k >= 0; --k) u = (u << 8) | p[k]; return (double)(long long)u; }
    }
    return __longlong_as_double(0x7ff8000000000000ll);
}

// The check of a timed run, at both levels of the host's check (compare.rs), with the same
// per-element rules: the benchmark level (|r − x| ≤ 0.01 + 0.05·|x|, NaN never equal; exact for
// integers; fp8 as floats) and the strict level (|r − x| ≤ atol + rtol·|r|, NaN at the same place
// equal; identical codes for exact outputs), plus the sums of the strict level's relative L2
// error over finite pairs. One slot of 6 words per (timed sample, output), zeroed before the
// sample: [0] += strict failures, [1] += benchmark failures, [2] = max(~i) over strict failures
// (the complement of the first failing index), [3] += Σ (r − x)² and [4] += Σ r² (doubles).
extern "C" __global__ void timed_check(const unsigned char* ref, const unsigned char* cand, u64 n,
                                       int code, int es, int exact, double atol, double rtol, u64* out) {
    u64 sbad = 0, bbad = 0, first_c = 0;
    double err2 = 0.0, ref2 = 0.0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const unsigned char* rp = ref + i * es;
        const unsigned char* xp = cand + i * es;
        bool same = true;
        for (int k = 0; k < es; ++k) same &= rp[k] == xp[k];
        double r = decode_elem(rp, code), x = decode_elem(xp, code);
        bool rn = r != r, xn = x != x, both_nan = rn && xn;
        double d = fabs(r - x);
        bool bench, strict;
        if (exact) {
            bench = (code == 4 || code == 5) ? (!rn && !xn && (r == x || d <= 0.01 + 0.05 * fabs(x))) : same;
            strict = same || both_nan;
        } else {
            bench = r == x || d <= 0.01 + 0.05 * fabs(x);
            strict = both_nan || r == x || d <= atol + rtol * fabs(r);
        }
        if (!strict) { ++sbad; if (~i > first_c) first_c = ~i; }
        if (!bench) ++bbad;
        if (isfinite(r) && isfinite(x)) { err2 += d * d; ref2 += r * r; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        sbad += __shfl_down_sync(0xffffffffu, sbad, o);
        bbad += __shfl_down_sync(0xffffffffu, bbad, o);
        u64 f = __shfl_down_sync(0xffffffffu, first_c, o);
        first_c = f > first_c ? f : first_c;
        err2 += __shfl_down_sync(0xffffffffu, err2, o);
        ref2 += __shfl_down_sync(0xffffffffu, ref2, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (sbad) { atomicAdd(&out[0], sbad); atomicMax(&out[2], first_c); }
        if (bbad) atomicAdd(&out[1], bbad);
        if (err2 != 0.0) atomicAdd((double*)&out[3], err2);
        if (ref2 != 0.0) atomicAdd((double*)&out[4], ref2);
    }
}

// The correctness check on the device: reference `ref`, the candidate's two runs `ra` and `rb`
// (after poisons `pa` and `pb`, es bytes little-endian), by the rules of the host's
// `compare::scan` element for element — an element is unwritten when both runs still hold
// their poison (and the reference does not), and is then not compared; NaN/Inf where the
// reference is finite; the two levels; max |r − x|, max |r − x|/|r| and the relative L2 sums
// over finite pairs; whether the reference and the candidate are constant (equal to element 0).
// out (16 words, zeroed before): [0] benchmark failures, [1] strict failures, [2] ~first strict
// failure, [3] max_abs and [4] max_rel (double bits: non-negative, so they order as integers),
// [5] Σ(r − x)², [6] Σ r² (doubles), [7] unwritten, [8] ~first unwritten, [9] runs differ,
// [10] ~first difference, [11] NaN/Inf, [12] ~first NaN/Inf, [13] shared NaN, [14] reference
// elements unlike element 0, [15] candidate elements unlike element 0.
__device__ __forceinline__ void max_first(u64& f, u64 i) { if (~i > f) f = ~i; }
extern "C" __global__ void check_runs(const unsigned char* ref, const unsigned char* ra, const unsigned char* rb,
                                      u64 n, int code, int es, int exact, double atol, double rtol,
                                      u64 pa, u64 pb, u64* out) {
    u64 bench_fail = 0, mism = 0, f_bad = 0, unw = 0, f_unw = 0, dif = 0, f_dif = 0, nan = 0, f_nan = 0,
        shared = 0, rnc = 0, cnc = 0;
    double max_abs = 0.0, max_rel = 0.0, err2 = 0.0, ref2 = 0.0;
    const double r0 = decode_elem(ref, code), x0 = decode_elem(ra, code);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const unsigned char* rp = ref + i * es;
        const unsigned char* ap = ra + i * es;
        const unsigned char* bp = rb + i * es;
        bool a_poison = true, b_poison = true, r_poison = true, ab_same = true, ra_same = true;
        for (int k = 0; k < es; ++k) {
            const unsigned char qa = (unsigned char)(pa >> (8 * k)), qb = (unsigned char)(pb >> (8 * k));
            a_poison &= ap[k] == qa;
            b_poison &= bp[k] == qb;
            r_poison &= rp[k] == qa;
            ab_same &= ap[k] == bp[k];
            ra_same &= rp[k] == ap[k];
        }
        if (a_poison && b_poison && !r_poison) { ++unw; max_first(f_unw, i); continue; }
        if (!ab_same) { ++dif; max_first(f_dif, i); }
        const double r = decode_elem(rp, code), x = decode_elem(ap, code);
        const bool rn = r != r, xn = x != x, both_nan = rn && xn;
        if (!(r == r0 || (rn && r0 != r0))) ++rnc;
        if (!(x == x0 || (xn && x0 != x0))) ++cnc;
        if (both_nan) ++shared;
        if (!isfinite(x) && !(both_nan || (isinf(r) && r == x))) { ++nan; max_first(f_nan, i); }
        const double d = fabs(r - x);
        bool bench, strict;
        if (exact) {
            strict = ra_same || both_nan;
            bench = (code == 4 || code == 5) ? (!rn && !xn && (r == x || d <= 0.01 + 0.05 * fabs(x))) : ra_same;
        } else {
            bench = r == x || d <= 0.01 + 0.05 * fabs(x);
            strict = both_nan || r == x || d <= atol + rtol * fabs(r);
        }
        if (!bench) ++bench_fail;
        if (!strict) { ++mism; max_first(f_bad, i); }
        if (isfinite(r) && isfinite(x)) {
            max_abs = fmax(max_abs, d);
            if (r != 0.0) max_rel = fmax(max_rel, d / fabs(r));
            err2 += d * d;
            ref2 += r * r;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        bench_fail += __shfl_down_sync(0xffffffffu, bench_fail, o);
        mism += __shfl_down_sync(0xffffffffu, mism, o);
        unw += __shfl_down_sync(0xffffffffu, unw, o);
        dif += __shfl_down_sync(0xffffffffu, dif, o);
        nan += __shfl_down_sync(0xffffffffu, nan, o);
        shared += __shfl_down_sync(0xffffffffu, shared, o);
        rnc += __shfl_down_sync(0xffffffffu, rnc, o);
        cnc += __shfl_down_sync(0xffffffffu, cnc, o);
        u64 t;
        t = __shfl_down_sync(0xffffffffu, f_bad, o); f_bad = t > f_bad ? t : f_bad;
        t = __shfl_down_sync(0xffffffffu, f_unw, o); f_unw = t > f_unw ? t : f_unw;
        t = __shfl_down_sync(0xffffffffu, f_dif, o); f_dif = t > f_dif ? t : f_dif;
        t = __shfl_down_sync(0xffffffffu, f_nan, o); f_nan = t > f_nan ? t : f_nan;
        max_abs = fmax(max_abs, __shfl_down_sync(0xffffffffu, max_abs, o));
        max_rel = fmax(max_rel, __shfl_down_sync(0xffffffffu, max_rel, o));
        err2 += __shfl_down_sync(0xffffffffu, err2, o);
        ref2 += __shfl_down_sync(0xffffffffu, ref2, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (bench_fail) atomicAdd(&out[0], bench_fail);
        if (mism) { atomicAdd(&out[1], mism); atomicMax(&out[2], f_bad); }
        if (max_abs > 0.0) atomicMax(&out[3], (u64)__double_as_longlong(max_abs));
        if (max_rel > 0.0) atomicMax(&out[4], (u64)__double_as_longlong(max_rel));
        if (err2 != 0.0) atomicAdd((double*)&out[5], err2);
        if (ref2 != 0.0) atomicAdd((double*)&out[6], ref2);
        if (unw) { atomicAdd(&out[7], unw); atomicMax(&out[8], f_unw); }
        if (dif) { atomicAdd(&out[9], dif); atomicMax(&out[10], f_dif); }
        if (nan) { atomicAdd(&out[11], nan); atomicMax(&out[12], f_nan); }
        if (shared) atomicAdd(&out[13], shared);
        if (rnc) atomicAdd(&out[14], rnc);
        if (cnc) atomicAdd(&out[15], cnc);
    }
}
