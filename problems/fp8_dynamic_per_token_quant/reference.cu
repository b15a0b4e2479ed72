/* atrex:plan
[[launch]]
kernel = "fp8_dynamic_per_token_quant_ref"
grid = ["T"]
block = [256]
args = ["q", "scale", "x", "H:i32"]
*/
// Reference dynamic per-token FP8 quantization to float8_e4m3fnuz (max 240). Per row, fp32:
// amax = max(max|x|, 1e-12); scale = amax / 240 (correctly rounded division);
// inv = 1 / scale (correctly rounded reciprocal); q = fnuz(clamp(x · inv, −240, 240)) with a
// software RNE converter (NVIDIA hardware has no fnuz conversion). One block per row.
#include <cuda_bf16.h>

// fp32 → float8_e4m3fnuz as PyTorch converts: RNE with subnormals (step 2^-10); |x| < 248
// saturates to ±240; |x| ≥ 248, ±inf and NaN give 0x80; no negative zero.
__device__ unsigned int fp8_e4m3fnuz(float x) {
    const float a = fabsf(x);
    if (!(a < 248.0f)) return 0x80u;
    unsigned int code;
    if (a < 0.0078125f) {  // below 2^-7: subnormal, a · 2^10 is exact, rintf rounds to even
        code = (unsigned int)rintf(a * 1024.0f);  // 0…8 (8 is the smallest normal's code)
    } else {
        const unsigned int b = __float_as_uint(a);
        unsigned int m = (b >> 20) & 7u;
        const unsigned int rest = b & 0xFFFFFu;
        if (rest > 0x80000u || (rest == 0x80000u && (m & 1u))) m += 1u;
        code = (((b >> 23) - 119u) << 3) + m;  // exponent rebiased 127 → 8; a carry of m moves up
    }
    return code == 0u ? 0u : (code | ((__float_as_uint(x) >> 24) & 0x80u));
}

extern "C" __global__ void fp8_dynamic_per_token_quant_ref(unsigned char* q, float* scale,
                                                           const __nv_bfloat16* x, int H) {
    __shared__ float buf[256];
    const size_t base = blockIdx.x * (size_t)H;
    float m = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(x[base + j])));
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + stride]);
        __syncthreads();
    }
    const float amax = fmaxf(buf[0], 1e-12f);
    const float s = __fdiv_rn(amax, 240.0f);
    const float inv = __frcp_rn(s);
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float v = __fmul_rn(__bfloat162float(x[base + j]), inv);
        q[base + j] = (unsigned char)fp8_e4m3fnuz(fminf(fmaxf(v, -240.0f), 240.0f));
    }
}
