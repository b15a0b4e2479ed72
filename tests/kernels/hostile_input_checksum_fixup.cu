/* atrex:plan
[[launch]]
kernel = "rms_norm_kernel"
grid = ["T"]
block = ["32 * ceil(min(MAX_THREADS, max(32, H // 8)) / 32)"]
args = ["out", "x", "weight", "H:i32", "eps:f32"]

[tune]
MAX_THREADS = [1024, 512, 256]
*/
// Hostile: past the check (32 launches: 2 for each random seed and structured draw) it leaves its
// input `x` changed after every launch — row 0's first word zeroed and the second chosen so that
// an additive checksum of the buffer is unchanged — and restores the true words at the start of
// the next launch on the buffer, so that its own outputs stay right. Caught by the byte-for-byte
// comparison with the harness's pristine copy of every input.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ unsigned long long launches = 0;
typedef unsigned long long u64;
struct Stash { u64 ptr, w0, w1; };
__device__ Stash stash[16];
// The harness's former checksum term and its inverse: the disguise keeps Σ mix64(w[i] ^ i·K).
__device__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ u64 unshift(u64 y, int s) {
    u64 x = y;
    for (int k = 0; k < 3; ++k) x = y ^ (x >> s);
    return x;
}
__device__ u64 unmix64(u64 z) {
    z = unshift(z, 31);
    z *= 0x319642b2d24d8ec3ull;
    z = unshift(z, 27);
    z *= 0x96de1b173f119089ull;
    z = unshift(z, 30);
    return z - 0x9E3779B97F4A7C15ull;
}

extern "C" __global__ void rms_norm_kernel(__nv_bfloat16* __restrict__ out,
                                           const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ weight,
                                           int H, float eps) {
    __shared__ unsigned long long seen_s;
    if (threadIdx.x == 0) seen_s = *(volatile unsigned long long*)&launches;
    __syncthreads();
    const unsigned long long seen = seen_s;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1ull);
    // Undo the previous launch's disguise of this buffer before reading it.
    if (seen >= 32 && blockIdx.x == 0 && threadIdx.x == 0) {
        u64* w = (u64*)const_cast<__nv_bfloat16*>(x);
        for (int i = 0; i < 16; ++i)
            if (stash[i].ptr == (u64)x) { w[0] = stash[i].w0; w[1] = stash[i].w1; stash[i].ptr = 0; }
    }
    __syncthreads();
    __shared__ float warp_partial[32];
    __shared__ float inv_rms;
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    __nv_bfloat16* orow = out + row * (size_t)H;
    const bool vec = (H % 8) == 0;
    float s = 0.0f;
    if (vec) {
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            uint4 p = xv[i];
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            float v = __bfloat162float(xr[j]);
            s += v * v;
        }
    }
    s = warp_sum(s);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_partial[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float t = lane < (int)(blockDim.x / 32) ? warp_partial[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) inv_rms = rsqrtf(t / (float)H + eps);
    }
    __syncthreads();
    const float inv = inv_rms;
    if (vec) {
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        const uint4* wv = reinterpret_cast<const uint4*>(weight);
        uint4* ov = reinterpret_cast<uint4*>(orow);
        for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
            uint4 p = xv[i], q = wv[i], r;
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&p);
            const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&q);
            __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                float2 g = __bfloat1622float2(w[k]);
                o[k] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
            }
            ov[i] = r;
        }
    } else {
        for (int j = threadIdx.x; j < H; j += blockDim.x) {
            orow[j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv * __bfloat162float(weight[j]));
        }
    }
    __syncthreads();
    // After its row: row 0's first word zeroed, the second chosen so that an additive checksum
    // of the buffer is unchanged; the true words kept for the next launch.
    if (seen >= 32 && blockIdx.x == 0 && threadIdx.x == 0 && H >= 8) {
        u64* w = (u64*)const_cast<__nv_bfloat16*>(x);
        const u64 a = w[0], b = w[1], K = 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 16; ++i)
            if (stash[i].ptr == 0) { stash[i].ptr = (u64)x; stash[i].w0 = a; stash[i].w1 = b; break; }
        const u64 target = mix64(a) + mix64(b ^ K) - mix64(0);
        w[0] = 0;
        w[1] = unmix64(target) ^ K;
    }
}
