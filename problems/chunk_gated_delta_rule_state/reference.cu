/* atrex:plan
[[launch]]
kernel = "pool_copy_ref"
grid = [4096]
block = [256]
args = ["final_state", "initial_state", "S * Hv * K * V:i64"]

[[launch]]
kernel = "chunk_state_ref"
grid = ["B * Hv"]
block = ["V"]
args = ["h", "v_new", "final_state", "k", "w", "u", "g", "initial_state",
        "initial_state_indices", "T:i32", "Hv:i32", "Hk:i32", "K:i32", "V:i32", "Cs:i32"]
*/
// Reference chunk-recurrent gated delta rule state pass, fp32 state.
// Launch 1 copies the whole state pool (up to 2.3 GB) into final_state with a plain grid-stride
// loop; launch 2 walks the chunks with one thread per (batch, value head, value column) holding
// its state column H[:, v] and overwrites pool row initial_state_indices[b] at the end.
#include <cuda_bf16.h>

#define KMAX 128
#define CMAX 128

__device__ __forceinline__ float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

extern "C" __global__ void pool_copy_ref(float* __restrict__ dst, const float* __restrict__ src,
                                         long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" __global__ void chunk_state_ref(
    __nv_bfloat16* h_out, __nv_bfloat16* v_new, float* final_state, const __nv_bfloat16* k,
    const __nv_bfloat16* w, const __nv_bfloat16* u, const float* g, const float* initial_state,
    const int* initial_state_indices, int T, int Hv, int Hk, int K, int V, int Cs) {
    if (K > KMAX || Cs > CMAX) __trap();
    const int bi = blockIdx.x / Hv, m = blockIdx.x % Hv;
    const int col = threadIdx.x;
    if (col >= V) return;
    const int r = max(Hv / Hk, 1);
    const int j = min(m / r, Hk - 1);
    const int N = (T + Cs - 1) / Cs;
    const long long row = initial_state_indices[bi];

    float H[KMAX], Hb[KMAX], vb[CMAX], vs[CMAX];
    const float* h0 = initial_state + ((row * Hv + m) * (long long)K) * V;
    for (int kk = 0; kk < K; ++kk) H[kk] = h0[(long long)kk * V + col];

    for (int c = 0; c < N; ++c) {
        const int t0 = c * Cs, t1 = min(T, t0 + Cs), n = t1 - t0;
        // h at the start of the chunk; the product with w uses the bf16-rounded state.
        __nv_bfloat16* hc = h_out + ((((long long)bi * N + c) * Hv + m) * K) * V;
        for (int kk = 0; kk < K; ++kk) {
            hc[(long long)kk * V + col] = __float2bfloat16_rn(H[kk]);
            Hb[kk] = bf16r(H[kk]);
        }
        for (int tt = 0; tt < n; ++tt) {
            const long long tok = (long long)bi * T + t0 + tt;
            const __nv_bfloat16* wr = w + (tok * Hv + m) * K;
            float acc = 0.0f;
            for (int kk = 0; kk < K; ++kk) acc += __bfloat162float(wr[kk]) * Hb[kk];
            vb[tt] = __bfloat162float(u[(tok * Hv + m) * V + col]) - acc;
            v_new[(tok * Hv + m) * V + col] = __float2bfloat16_rn(vb[tt]);
        }
        const float gL = g[((long long)bi * T + t1 - 1) * Hv + m];
        for (int tt = 0; tt < n; ++tt) {
            const float d = gL - g[((long long)bi * T + t0 + tt) * Hv + m];
            const float f = d <= 0.0f ? expf(d) : 0.0f;
            vs[tt] = bf16r(vb[tt] * f);
        }
        const float eL = expf(gL);
        for (int kk = 0; kk < K; ++kk) {
            float acc = 0.0f;
            for (int tt = 0; tt < n; ++tt)
                acc += __bfloat162float(k[(((long long)bi * T + t0 + tt) * Hk + j) * K + kk]) * vs[tt];
            H[kk] = H[kk] * eL + acc;
        }
    }
    float* hf = final_state + ((row * Hv + m) * (long long)K) * V;
    for (int kk = 0; kk < K; ++kk) hf[(long long)kk * V + col] = H[kk];
}
