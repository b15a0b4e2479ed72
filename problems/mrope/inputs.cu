/* atrex:plan
[[launch]]
kernel = "mrope_cos_sin"
grid = ["min(ceil(3 * T * half / 256), 65535)"]
block = [256]
args = ["cos", "sin", "3 * T * half:i64", "seed:u64"]
*/
// Inputs of mrope: per-token cos/sin tables [3, T, half] (axis 0 temporal, 1 height, 2 width),
// cos = cos(θ), sin = sin(θ) of the same θ ~ 0.1·N(0,1) in fp32 (drawn in fp32, scaled in
// fp32). A counter-based generator (splitmix64 over seed and element index), so the values do
// not depend on the launch configuration.
typedef unsigned long long u64;

__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Standard normal (Box-Muller) from 2 × 24 random bits of element i.
__device__ __forceinline__ float normal01(u64 seed, u64 stream, u64 i) {
    const u64 r = mix64(mix64(seed ^ mix64(stream * 0xD1B54A32D192ED03ull)) + i);
    const float u1 = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    const float u2 = ((float)((r >> 16) & 0xFFFFFFull) + 0.5f) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

extern "C" __global__ void mrope_cos_sin(float* cos, float* sin, long long n, u64 seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float theta = 0.1f * normal01(seed, 0x6D726F7065ull, (u64)i);
        cos[i] = cosf(theta);
        sin[i] = sinf(theta);
    }
}
