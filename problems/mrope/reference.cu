/* atrex:plan
[[launch]]
kernel = "mrope_ref"
grid = ["min(ceil(T * Hq * half / 256), 65535)"]
block = [256]
args = ["q_out", "q", "cos", "sin", "T:i64", "Hq:i32", "D:i32", "R:i32",
        "mrope_section[0]:i32", "mrope_section[1]:i32", "mrope_section[2]:i32",
        "mrope_interleaved:i32", "is_neox_style:i32"]

[[launch]]
kernel = "mrope_ref"
grid = ["min(ceil(T * Hk * half / 256), 65535)"]
block = [256]
args = ["k_out", "k", "cos", "sin", "T:i64", "Hk:i32", "D:i32", "R:i32",
        "mrope_section[0]:i32", "mrope_section[1]:i32", "mrope_section[2]:i32",
        "mrope_interleaved:i32", "is_neox_style:i32"]

[[launch]]
kernel = "mrope_copy_tail_ref"
grid = ["max(1, min(ceil(T * Hq * (D - R) / 256), 65535))"]
block = [256]
args = ["q_out", "q", "T:i64", "Hq:i32", "D:i32", "R:i32"]

[[launch]]
kernel = "mrope_copy_tail_ref"
grid = ["max(1, min(ceil(T * Hk * (D - R) / 256), 65535))"]
block = [256]
args = ["k_out", "k", "T:i64", "Hk:i32", "D:i32", "R:i32"]
*/
// Reference mrope: one thread per (token, head, frequency f < half = R/2).
// Axis of f: contiguous sections a(f) = 0 if f < s0, 1 if f < s0 + s1, else 2; (interleaved
// mode: 1 if f % 3 == 1 and f <= 3·s1, 2 if f % 3 == 2 and f <= 3·s2, else 0).
// c = cos[a(f), t, f], s = sin[a(f), t, f] (global f). NeoX pairs (f, f + half), GPT-J pairs
// (2f, 2f + 1): y1 = bf16(x1·c − x2·s), y2 = bf16(x2·c + x1·s) in fp32, each product and the
// sum rounded separately (no FMA contraction: explicit _rn intrinsics). Dims >= R are copied.
#include <cuda_bf16.h>

extern "C" __global__ void mrope_ref(__nv_bfloat16* out, const __nv_bfloat16* x, const float* cos,
                                     const float* sin, long long T, int H, int D, int R, int s0,
                                     int s1, int s2, int interleaved, int neox) {
    const int half = R / 2;
    const long long n = T * H * half;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const int f = (int)(i % half);
        const long long th = i / half;  // token * H + head
        const long long t = th / H;
        int axis;
        if (interleaved) {
            axis = (f % 3 == 1 && f <= 3 * s1) ? 1 : (f % 3 == 2 && f <= 3 * s2) ? 2 : 0;
        } else {
            axis = f < s0 ? 0 : (f < s0 + s1 ? 1 : 2);
        }
        const float c = cos[((long long)axis * T + t) * half + f];
        const float s = sin[((long long)axis * T + t) * half + f];
        const long long base = th * D;
        const long long i1 = base + (neox ? f : 2 * f);
        const long long i2 = base + (neox ? f + half : 2 * f + 1);
        const float x1 = __bfloat162float(x[i1]);
        const float x2 = __bfloat162float(x[i2]);
        out[i1] = __float2bfloat16_rn(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
        out[i2] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
    }
}

extern "C" __global__ void mrope_copy_tail_ref(__nv_bfloat16* out, const __nv_bfloat16* x,
                                               long long T, int H, int D, int R) {
    const int rest = D - R;
    const long long n = T * H * rest;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long th = i / rest;
        const long long e = th * D + R + i % rest;
        out[e] = x[e];
    }
}
