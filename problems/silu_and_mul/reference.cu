/* atrex:plan
[[launch]]
kernel = "silu_and_mul_ref"
grid = ["min(ceil(T * d / 256), 65535)"]
block = [256]
args = ["out", "x", "T:i64", "d:i64"]
*/
// Reference SwiGLU: a = bf16(silu(gate)); out = bf16(float(a) · up). fp32 math, the spec's two
// rounding points. One thread per output element (grid-stride).
#include <cuda_bf16.h>

extern "C" __global__ void silu_and_mul_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                            long long T, long long d) {
    const long long n = T * d;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / d, j = i % d;
        const float g = __bfloat162float(x[t * 2 * d + j]);
        const float u = __bfloat162float(x[t * 2 * d + d + j]);
        const float a = __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g))));
        out[i] = __float2bfloat16_rn(a * u);
    }
}
