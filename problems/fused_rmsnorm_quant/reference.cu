/* atrex:plan
[[launch]]
kernel = "fused_rmsnorm_quant_ref"
grid = ["T"]
block = [256]
args = ["quantized", "scale", "residual_out", "x", "residual", "weight", "H:i32", "eps:f32"]
*/
// Reference residual add + RMSNorm + per-row FP8 (float8_e4m3fnuz) quantization. Per row:
//   r = bf16(x + residual) → residual_out;
//   ms = fp32(Σ r² / H) with Σ r² accumulated in fp64 (each r² is exact, so the sum is
//        independent of the summation order in practice and any kernel can reproduce it);
//   rstd = rsqrtf(ms + eps)   (the approximate instruction, as PyTorch's kernels use);
//   n = bf16((r · rstd) · w)  (one rounding);
//   scale = amax|n| / 240 (1 when 0); quantized = fnuz(n / scale), true division, no clamp.
// fp8 codes are compared exactly: a candidate must follow the same rounding points; the fnuz
// conversion is done in software (NVIDIA hardware has none). One block per row.
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

__device__ __forceinline__ float residual_sum(const __nv_bfloat16* x, const __nv_bfloat16* res, size_t i) {
    return __bfloat162float(__float2bfloat16_rn(__bfloat162float(x[i]) + __bfloat162float(res[i])));
}

extern "C" __global__ void fused_rmsnorm_quant_ref(unsigned char* quantized, float* scale,
                                                   __nv_bfloat16* residual_out,
                                                   const __nv_bfloat16* x,
                                                   const __nv_bfloat16* residual,
                                                   const __nv_bfloat16* weight, int H, float eps) {
    __shared__ double dbuf[256];
    __shared__ float fbuf[256];
    const size_t base = blockIdx.x * (size_t)H;
    double s = 0.0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float r = residual_sum(x, residual, base + j);
        residual_out[base + j] = __float2bfloat16_rn(r);
        s += (double)(r * r);
    }
    dbuf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) dbuf[threadIdx.x] += dbuf[threadIdx.x + stride];
        __syncthreads();
    }
    const float ms = __double2float_rn(dbuf[0] / (double)H);
    const float rstd = rsqrtf(ms + eps);
    float m = 0.0f;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float n = __bfloat162float(__float2bfloat16_rn(
            __fmul_rn(__fmul_rn(residual_sum(x, residual, base + j), rstd), __bfloat162float(weight[j]))));
        m = fmaxf(m, fabsf(n));
    }
    fbuf[threadIdx.x] = m;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) fbuf[threadIdx.x] = fmaxf(fbuf[threadIdx.x], fbuf[threadIdx.x + stride]);
        __syncthreads();
    }
    float sc = __fdiv_rn(fbuf[0], 240.0f);
    if (sc == 0.0f) sc = 1.0f;
    if (threadIdx.x == 0) scale[blockIdx.x] = sc;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float n = __bfloat162float(__float2bfloat16_rn(
            __fmul_rn(__fmul_rn(residual_sum(x, residual, base + j), rstd), __bfloat162float(weight[j]))));
        quantized[base + j] = (unsigned char)fp8_e4m3fnuz(__fdiv_rn(n, sc));
    }
}
