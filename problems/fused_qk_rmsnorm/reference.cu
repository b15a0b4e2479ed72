/* atrex:plan
[[launch]]
kernel = "fused_qk_rmsnorm_ref"
grid = ["T * (Hq + 2*Hkv)"]
block = [128]
args = ["out", "hidden_states", "q_weight", "k_weight", "Hq:i32", "Hkv:i32", "D:i32", "eps:f32"]
*/
// Reference per-head QK RMSNorm on packed fp16 QKV. One block per (token, head). For q and k
// heads: n = fp16(x · rsqrt(mean(x²) + eps)) (first rounding), out = fp16(float(w) · float(n))
// (second rounding); v heads are copied unchanged. fp32 math, except that Σx² is accumulated
// in fp64 (each x² is exact) and rounded once, ms = fp32(Σx² / D): with two roundings after
// it, a last-bit difference in rstd can move the output by two fp16 ulps, so the sum is made
// independent of the summation order (candidates doing the same match bit for bit).
// rstd = rsqrtf(ms + eps). Shared-memory tree sum.
#include <cuda_fp16.h>

extern "C" __global__ void fused_qk_rmsnorm_ref(__half* out, const __half* hidden_states,
                                                const __half* q_weight, const __half* k_weight,
                                                int Hq, int Hkv, int D, float eps) {
    __shared__ double buf[128];
    const int heads = Hq + 2 * Hkv;
    const int head = blockIdx.x % heads;
    const size_t base = (size_t)blockIdx.x * D;  // token-major: (t · heads + head) · D
    if (head >= Hq + Hkv) {
        for (int j = threadIdx.x; j < D; j += blockDim.x) out[base + j] = hidden_states[base + j];
        return;
    }
    const __half* w = head < Hq ? q_weight : k_weight;
    double s = 0.0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        const double v = __half2float(hidden_states[base + j]);
        s += v * v;
    }
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float rstd = rsqrtf(__double2float_rn(buf[0] / (double)D) + eps);
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        const __half n = __float2half_rn(__half2float(hidden_states[base + j]) * rstd);
        out[base + j] = __float2half_rn(__half2float(w[j]) * __half2float(n));
    }
}
