/* atrex:plan
[[launch]]
kernel = "pool_copy_ref"
grid = ["min(65535, ceil(S * Hv * K * V / 256))"]
block = [256]
args = ["final_state", "initial_state", "S * Hv * K * V:i64"]

[[launch]]
kernel = "gdr_update_ref"
grid = ["B * Hv"]
block = ["V"]
args = ["out", "final_state", "A_log", "a", "dt_bias", "q", "k", "v", "b", "initial_state",
        "initial_state_indices", "B:i32", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "scale:f32", "softplus_beta:f32", "softplus_threshold:f32", "use_qk_l2norm:i32"]
*/
// Reference gated delta rule (token-recurrent), fp32 throughout.
// Launch 1 copies the whole state pool into final_state; launch 2 runs the recurrence with one
// thread per (batch, value head, value column) holding its state column H[:, v] (K floats) and
// overwrites pool row initial_state_indices[b]. Every thread normalizes q and k by itself.
#include <cuda_bf16.h>

#define KMAX 256

extern "C" __global__ void pool_copy_ref(float* __restrict__ dst, const float* __restrict__ src,
                                         long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" __global__ void gdr_update_ref(
    __nv_bfloat16* out, float* final_state, const float* A_log, const __nv_bfloat16* a,
    const __nv_bfloat16* dt_bias, const __nv_bfloat16* q, const __nv_bfloat16* k,
    const __nv_bfloat16* v, const __nv_bfloat16* b, const float* initial_state,
    const int* initial_state_indices, int B, int T, int Hv, int Hq, int K, int V, float scale,
    float beta, float threshold, int use_l2) {
    if (K > KMAX) __trap();
    const int bm = blockIdx.x;
    const int bi = bm / Hv, m = bm % Hv;
    const int col = threadIdx.x;
    if (col >= V) return;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const long long row = initial_state_indices[bi];

    float H[KMAX];
    const float* h0 = initial_state + ((row * Hv + m) * (long long)K) * V;
    for (int kk = 0; kk < K; ++kk) H[kk] = h0[(long long)kk * V + col];

    const float A = expf(A_log[m]);
    const float dtb = __bfloat162float(dt_bias[m]);
    for (int t = 0; t < T; ++t) {
        const long long tok = (long long)bi * T + t;
        const float z = __bfloat162float(a[tok * Hv + m]) + dtb;
        const float sp = (beta * z > threshold) ? z : log1pf(expf(beta * z)) / beta;
        const float gamma = -A * sp;
        const float wb = 1.0f / (1.0f + expf(-__bfloat162float(b[tok * Hv + m])));
        const __nv_bfloat16* qr = q + (tok * Hq + j) * K;
        const __nv_bfloat16* kr = k + (tok * Hq + j) * K;
        float qn = 1.0f, kn = 1.0f;  // the norms q and k are divided by
        if (use_l2) {
            float sq = 0.0f, sk = 0.0f;
            for (int kk = 0; kk < K; ++kk) {
                const float x = __bfloat162float(qr[kk]), y = __bfloat162float(kr[kk]);
                sq += x * x;
                sk += y * y;
            }
            qn = fmaxf(sqrtf(sq), 1e-6f);
            kn = fmaxf(sqrtf(sk), 1e-6f);
        }
        const float decay = expf(gamma);
        float p = 0.0f;
        for (int kk = 0; kk < K; ++kk) {
            H[kk] *= decay;
            p += H[kk] * (__bfloat162float(kr[kk]) / kn);
        }
        const float delta = (__bfloat162float(v[(tok * Hv + m) * V + col]) - p) * wb;
        float o = 0.0f;
        for (int kk = 0; kk < K; ++kk) {
            H[kk] += (__bfloat162float(kr[kk]) / kn) * delta;
            o += H[kk] * ((__bfloat162float(qr[kk]) / qn) * scale);
        }
        out[(tok * Hv + m) * V + col] = __float2bfloat16_rn(o);
    }
    float* hf = final_state + ((row * Hv + m) * (long long)K) * V;
    for (int kk = 0; kk < K; ++kk) hf[(long long)kk * V + col] = H[kk];
}
