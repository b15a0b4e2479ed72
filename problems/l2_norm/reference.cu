/* atrex:plan
[[launch]]
kernel = "l2_norm_ref"
grid = ["T"]
block = [256]
args = ["out", "x", "H:i32", "eps:f32"]
*/
// Reference L2 normalization: out = bf16(x · rsqrt(Σx² + eps)), fp32; eps is added to the sum
// of squares (not a max on the norm). One block per row, shared-memory tree sum.
#include <cuda_bf16.h>

extern "C" __global__ void l2_norm_ref(__nv_bfloat16* out, const __nv_bfloat16* x, int H,
                                       float eps) {
    __shared__ float buf[256];
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * (size_t)H;
    float s = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float v = __bfloat162float(xr[j]);
        s += v * v;
    }
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float inv = rsqrtf(buf[0] + eps);
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        out[row * (size_t)H + j] = __float2bfloat16_rn(__bfloat162float(xr[j]) * inv);
    }
}
