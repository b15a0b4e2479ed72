/* atrex:plan
[[launch]]
kernel = "per_token_group_quant_fp8_ref"
grid = ["T * H / G"]
block = [128]
args = ["quantized", "scales", "x", "G:i32"]
*/
// Reference per-token-group FP8 quantization (CUDA build: float8_e4m3fn, F = 448). One block
// per 1×G group (groups are contiguous, so group k covers x[k·G, (k+1)·G) and scales[k]):
// s = max(amax / 448, 1e-10) (fp32 division, then the lower clamp);
// quantized = e4m3fn(clamp(x / s, −448, 448)) — true division, software RNE converter.
// 64-bit offsets (up to 6.3e9 elements).
#include <cuda_bf16.h>

// fp32 → float8_e4m3fn as PyTorch converts: RNE with subnormals (step 2^-9); |x| ≤ 464
// saturates to ±448; larger, ±inf and NaN give NaN (0x7F | sign); signed zero kept.
__device__ unsigned int fp8_e4m3fn(float x) {
    const unsigned int sign = (__float_as_uint(x) >> 24) & 0x80u;
    const float a = fabsf(x);
    if (!(a <= 464.0f)) return sign | 0x7Fu;
    unsigned int code;
    if (a < 0.015625f) {  // below 2^-6: subnormal, a · 2^9 is exact, rintf rounds to even
        code = (unsigned int)rintf(a * 512.0f);  // 0…8 (8 is the smallest normal's code)
    } else {
        const unsigned int b = __float_as_uint(a);
        unsigned int m = (b >> 20) & 7u;
        const unsigned int rest = b & 0xFFFFFu;
        if (rest > 0x80000u || (rest == 0x80000u && (m & 1u))) m += 1u;
        code = (((b >> 23) - 120u) << 3) + m;  // exponent rebiased 127 → 7; a carry of m moves up
    }
    return sign | (code > 0x7Eu ? 0x7Eu : code);  // (448, 464] → 448
}

extern "C" __global__ void per_token_group_quant_fp8_ref(unsigned char* quantized, float* scales,
                                                         const __nv_bfloat16* x, int G) {
    __shared__ float buf[128];
    const size_t group = blockIdx.x;
    const size_t base = group * (size_t)G;
    float m = 0.0f;
    for (int j = threadIdx.x; j < G; j += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(x[base + j])));
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + stride]);
        __syncthreads();
    }
    const float s = fmaxf(__fdiv_rn(buf[0], 448.0f), 1e-10f);
    if (threadIdx.x == 0) scales[group] = s;
    for (int j = threadIdx.x; j < G; j += blockDim.x) {
        const float v = __fdiv_rn(__bfloat162float(x[base + j]), s);
        quantized[base + j] = (unsigned char)fp8_e4m3fn(fminf(fmaxf(v, -448.0f), 448.0f));
    }
}
