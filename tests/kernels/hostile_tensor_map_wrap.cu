/* atrex:plan
[[tensor_map]]
name = "tm_x"
tensor = "x"
dtype = "bf16"
# 14 bytes of row 0, then two dims of 2^28 + 1 rows 2^35 bytes apart: each reaches 2^63 bytes,
# together 2^64, which a 64-bit sum wraps to 0, so the map would seem to reach 16 bytes.
dims = ["8", "268435457", "268435457"]
strides = ["34359738368", "34359738368"]
box = ["8", "1", "1"]

[[launch]]
kernel = "rms_norm_kernel"
grid = ["T"]
block = ["BLOCK"]
args = ["out", "x", "weight", "tm_x", "H:i32", "eps:f32"]

[tune]
BLOCK = [256, 512]
*/
// Hostile: a tensor map over `x` whose strides make a 64-bit sum of its reach wrap to 16 bytes,
// which any buffer holds; the copy engine would then read up to 2^64 bytes past `x`. The harness
// computes the reach in checked arithmetic and refuses the map with the plan's line (2) before
// anything is launched. The body is a valid RMSNorm that never touches the map.
#include <cuda_bf16.h>

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void rms_norm_kernel(__nv_bfloat16* __restrict__ out,
                                           const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ weight,
                                           const __grid_constant__ TensorMap tm_x, int H,
                                           float eps) {
    const __nv_bfloat16* row = x + (size_t)blockIdx.x * H;
    __nv_bfloat16* orow = out + (size_t)blockIdx.x * H;
    __shared__ float partial[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        const float v = __bfloat162float(row[i]);
        s += v * v;
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        float t = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.f;
        t = warp_sum(t);
        if (threadIdx.x == 0) partial[0] = t;
    }
    __syncthreads();
    const float r = rsqrtf(partial[0] / H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x)
        orow[i] = __float2bfloat16(__bfloat162float(row[i]) * r * __bfloat162float(weight[i]));
}
