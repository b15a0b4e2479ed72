/* atrex:plan
[[launch]]
kernel = "gen_topk_weights"
grid = ["ceil(T / 256)"]
block = [256]
args = ["topk_weights", "T:i32", "K:i32", "seed:u64"]
*/
// topk_weights: softmax over the K slots of N(0,1) samples (fp32), one thread per token.
// topk_ids uses the built-in randint(0, E) (independent, duplicates possible).
typedef unsigned long long u64;

__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 rnd(u64 seed, u64 stream, u64 i) {
    return mix64(mix64(seed ^ mix64(stream * 0xD1B54A32D192ED03ull)) + i);
}
__device__ __forceinline__ float normal(u64 seed, u64 stream, u64 i) {
    u64 r = rnd(seed, stream, i);
    float u1 = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = ((float)((r >> 16) & 0xFFFFFFull) + 0.5f) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

extern "C" __global__ void gen_topk_weights(float* w, int T, int K, u64 seed) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    float z[64];
    float m = -3.0e38f;
    for (int k = 0; k < K && k < 64; ++k) {
        z[k] = normal(seed, 1001, (u64)t * K + k);
        m = fmaxf(m, z[k]);
    }
    float s = 0.0f;
    for (int k = 0; k < K && k < 64; ++k) { z[k] = expf(z[k] - m); s += z[k]; }
    for (int k = 0; k < K && k < 64; ++k) w[(long long)t * K + k] = z[k] / s;
}
