/* atrex:plan
[[launch]]
kernel = "chunk_scores_ref"
grid = ["ceil(T * Cs / 256)", "Hv", "B"]
block = [256]
args = ["scores", "q", "k", "g", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "Cs:i32"]

[[launch]]
kernel = "chunk_output_ref"
grid = ["T", "Hv", "B"]
block = ["V"]
args = ["out", "scores", "q", "v", "h", "g", "T:i32", "Hv:i32", "Hq:i32", "K:i32", "V:i32",
        "Cs:i32", "scale:f32"]

[[scratch]]
name = "scores"
dtype = "fp32"
size = "B * Hv * T * Cs"
zero = false
*/
// Reference chunked gated delta-rule output (FLA chunk_fwd_o), fp32 math.
// Launch 1: one thread per (b, m, token t, position s in t's chunk) computes
//   A[t, s] = bf16( (q_t · k_s) · exp(g_t − g_s) )  if s ≤ t and g_t − g_s ≤ 0, else 0.
// Launch 2: one thread per (b, t, m, value column v):
//   out = bf16( σ · ( exp(g_t) · Σ_k q_t[k] · h[b, c(t), m, k, v]  +  Σ_{s in chunk, s ≤ t} A[t, s] · v_s[v] ) ).
// Tokens past T (the padded tail of the last chunk) are never read.
#include <cuda_bf16.h>

extern "C" __global__ void chunk_scores_ref(float* A, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                            const float* g, int T, int Hv, int Hq, int K, int Cs) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= (long long)T * Cs) return;
    const int m = blockIdx.y, bi = blockIdx.z;
    const int t = (int)(i / Cs), sl = (int)(i % Cs);
    const int s = (t / Cs) * Cs + sl;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const long long tokt = (long long)bi * T + t, toks = (long long)bi * T + s;
    float val = 0.0f;
    if (s <= t) {
        const float d = g[tokt * Hv + m] - g[toks * Hv + m];
        if (d <= 0.0f) {
            const __nv_bfloat16* qr = q + (tokt * Hq + j) * K;
            const __nv_bfloat16* kr = k + (toks * Hq + j) * K;
            float dot = 0.0f;
            for (int kk = 0; kk < K; ++kk) dot += __bfloat162float(qr[kk]) * __bfloat162float(kr[kk]);
            val = __bfloat162float(__float2bfloat16_rn(dot * expf(d)));
        }
    }
    A[(((long long)bi * Hv + m) * T + t) * Cs + sl] = val;
}

extern "C" __global__ void chunk_output_ref(__nv_bfloat16* out, const float* A, const __nv_bfloat16* q,
                                            const __nv_bfloat16* v, const __nv_bfloat16* h,
                                            const float* g, int T, int Hv, int Hq, int K, int V,
                                            int Cs, float scale) {
    const int t = blockIdx.x, m = blockIdx.y, bi = blockIdx.z;
    const int col = threadIdx.x;
    if (col >= V) return;
    const int r = max(Hv / Hq, 1);
    const int j = min(m / r, Hq - 1);
    const int N = (T + Cs - 1) / Cs;
    const int c = t / Cs;
    const long long tok = (long long)bi * T + t;
    const __nv_bfloat16* qr = q + (tok * Hq + j) * K;
    const __nv_bfloat16* hc = h + ((((long long)bi * N + c) * Hv + m) * K) * V;
    float inter = 0.0f;
    for (int kk = 0; kk < K; ++kk) inter += __bfloat162float(qr[kk]) * __bfloat162float(hc[(long long)kk * V + col]);
    inter *= expf(g[tok * Hv + m]);
    const float* Ar = A + (((long long)bi * Hv + m) * T + t) * Cs;
    float intra = 0.0f;
    for (int s = c * Cs; s <= t; ++s)
        intra += Ar[s - c * Cs] * __bfloat162float(v[(((long long)bi * T + s) * Hv + m) * V + col]);
    out[(tok * Hv + m) * V + col] = __float2bfloat16_rn(scale * (inter + intra));
}
