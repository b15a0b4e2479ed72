/* atrex:plan
[[launch]]
kernel = "causal_conv1d_ref"
grid = ["min(ceil(C * T / 256), 65535)"]
block = [256]
args = ["out", "x", "weight", "bias", "initial_state", "C:i32", "T:i32", "W:i32"]
*/
// Reference causal_conv1d (x and out are [C, T], token axis contiguous): one thread per output.
// s_c = (initial_state[0, c, 0 .. W-2], x[c, 0 .. T-1]);
// y = bias[c] + Σ_{j=0..W-1} weight[c, j] · s_c[t + j], fp32, accumulated from the bias in
// tap order with separately rounded products and sums; y is rounded to bf16;
// out = bf16(silu(float(y))), silu(z) = z / (1 + e^(−z)).
#include <cuda_bf16.h>

extern "C" __global__ void causal_conv1d_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                             const __nv_bfloat16* weight, const __nv_bfloat16* bias,
                                             const __nv_bfloat16* initial_state, int C, int T,
                                             int W) {
    const long long n = (long long)C * T;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long c = i / T;
        const int t = (int)(i % T);
        float acc = __bfloat162float(bias[c]);
        for (int j = 0; j < W; ++j) {
            const int m = t + j;  // index into s_c
            const float s = m < W - 1 ? __bfloat162float(initial_state[c * (W - 1) + m])
                                      : __bfloat162float(x[c * T + (m - (W - 1))]);
            acc = __fadd_rn(acc, __fmul_rn(__bfloat162float(weight[c * W + j]), s));
        }
        const float y = __bfloat162float(__float2bfloat16_rn(acc));
        out[i] = __float2bfloat16_rn(y / (1.0f + expf(-y)));
    }
}
