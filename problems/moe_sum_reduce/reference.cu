/* atrex:plan
[[launch]]
kernel = "moe_sum_reduce_ref"
grid = ["min(ceil(T * H / 256), 65535)"]
block = [256]
args = ["out", "expert_outputs", "T:i64", "K:i32", "H:i32", "routed_scaling_factor:f32"]
*/
// Reference moe_sum_reduce: one thread per output element (grid-stride).
// out[t,h] = bf16(factor · Σ_{k=0..K-1} float(x[t,k,h])): fp32 sum left to right, then the
// multiply, one rounding.
#include <cuda_bf16.h>

extern "C" __global__ void moe_sum_reduce_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                              long long T, int K, int H, float factor) {
    const long long n = T * H;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / H, h = i % H;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc = __fadd_rn(acc, __bfloat162float(x[(t * K + k) * H + h]));
        out[i] = __float2bfloat16_rn(__fmul_rn(factor, acc));
    }
}
