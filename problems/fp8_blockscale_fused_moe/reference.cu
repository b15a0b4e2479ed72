/* atrex:plan
[[launch]]
kernel = "fp8moe_route_ref"
grid = ["E"]
block = [1024]
args = ["topk_ids", "tok", "slot_pos", "cnt", "T*K:i32"]

[[launch]]
kernel = "fp8moe_offsets_ref"
grid = [1]
block = [32]
args = ["cnt", "off", "E:i32"]

[[launch]]
kernel = "fp8moe_gemm1_ref"
grid = ["ceil(I / 64)", "min(ceil(T / 128), 4096)", "E"]
block = [256]
args = ["hidden_states", "a_scale", "w1", "fc1_scale", "tok", "cnt", "off", "z", "T*K:i32", "K:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_gemm2_ref"
grid = ["ceil(H / 128)", "min(ceil(T / 128), 4096)", "E"]
block = [256]
args = ["z", "w2", "fc2_scale", "cnt", "off", "y", "H:i32", "I:i32"]

[[launch]]
kernel = "fp8moe_combine_ref"
grid = ["min(ceil(T * H / 256), 1048576)"]
block = [256]
args = ["out", "y", "topk_ids", "topk_weights", "slot_pos", "off", "T:i32", "H:i32", "K:i32"]

[[scratch]]
name = "tok"
dtype = "int32"
size = "E * T * K"

[[scratch]]
name = "slot_pos"
dtype = "int32"
size = "T * K"

[[scratch]]
name = "cnt"
dtype = "int32"
size = "E"

[[scratch]]
name = "off"
dtype = "int32"
size = "E + 1"

[[scratch]]
name = "z"
dtype = "fp32"
size = "T * K * I"

[[scratch]]
name = "y"
dtype = "fp32"
size = "T * K * H"
*/
// Reference FP8 (e4m3fnuz) block-scaled fused MoE, fp32 math throughout:
//   h = float(code)·a_scale, W1/W2 = float(code)·block scale (each one fp32 multiply);
//   per slot (t, k), e = topk_ids[t, k]: a = W1[e]·h[t]; z = silu(a[:I]) ⊙ a[I:]; y = W2[e]·z;
//   acc[t] = Σ_k topk_weights[t, k]·y[t, k] (products first, summed in slot order from k = 0);
//   out = fnuz(acc) WITHOUT clamping (|acc| ≥ 248 → NaN 0x80; [240, 248) → ±240; −0 → 0).
// Launches: route (block per expert: its slots in increasing flat index), prefix of counts,
// gemm1 (+ SiLU·up), gemm2, combine + fp8 cast. Every dot product is one fp32 FMA chain in
// increasing reduction index; silu uses exp in double rounded to float, and IEEE division.
// Baselines must reproduce this order bit for bit (the output is compared code for code).
#include <cuda_fp8.h>

__device__ __forceinline__ float fnuz_to_f(unsigned char c) {
    if (c == 0x80) return __int_as_float(0x7fc00000);
    const int e = (c >> 3) & 15, m = c & 7;
    const float v = e == 0 ? (float)m * 0.0009765625f : (float)(8 + m) * __uint_as_float((unsigned)(e - 11 + 127) << 23);
    return (c & 0x80) ? -v : v;
}

// Software RNE fp32 → e4m3fnuz without saturation (README rules).
__device__ __forceinline__ unsigned char f_to_fnuz(float x) {
    const float a = fabsf(x);
    if (!(a < 248.0f)) return 0x80;  // NaN, ±inf, overflow
    const unsigned s = (x < 0.0f) ? 0x80u : 0u;
    if (a < 0.0078125f) {
        const int m = (int)rintf(a * 1024.0f);
        if (m == 0) return 0;
        return (unsigned char)(s | (unsigned)m);  // m = 8 is the smallest normal 0x08
    }
    int e = (int)((__float_as_uint(a) >> 23) & 0xff) - 127;
    const float r = a * __uint_as_float((unsigned)(127 - e) << 23);
    int m = (int)rintf((r - 1.0f) * 8.0f);
    if (m == 8) { m = 0; ++e; }
    return (unsigned char)(s | ((unsigned)(e + 8) << 3) | (unsigned)m);
}

__device__ __forceinline__ float silu_f(float g) {
    const float e = (float)exp(-(double)g);
    return __fdiv_rn(g, __fadd_rn(1.0f, e));
}

__device__ __forceinline__ int block_excl_scan(bool flag, int* warp_tot, int* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const unsigned b = __ballot_sync(0xffffffffu, flag);
    const int pre = __popc(b & ((1u << lane) - 1u));
    if (lane == 0) warp_tot[warp] = __popc(b);
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int w = 0; w < nw; ++w) { const int c = warp_tot[w]; warp_tot[w] = s; s += c; }
        *total = s;
    }
    __syncthreads();
    return warp_tot[warp] + pre;
}

extern "C" __global__ void fp8moe_route_ref(const int* __restrict__ ids, int* tok, int* slot_pos, int* cnt, int N) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    int base = 0;
    for (int f0 = 0; f0 < N; f0 += blockDim.x) {
        const int f = f0 + threadIdx.x;
        const bool hit = f < N && ids[f] == e;
        const int r = block_excl_scan(hit, warp_tot, &total);
        if (hit) {
            tok[(long long)e * N + base + r] = f;
            slot_pos[f] = base + r;
        }
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) cnt[e] = base;
}

extern "C" __global__ void fp8moe_offsets_ref(const int* cnt, int* off, int E) {
    if (threadIdx.x == 0) {
        int s = 0;
        for (int e = 0; e < E; ++e) { off[e] = s; s += cnt[e]; }
        off[E] = s;
    }
}

#define BM 128
#define BN 128
#define BK 8

extern "C" __global__ void __launch_bounds__(256) fp8moe_gemm1_ref(
    const unsigned char* __restrict__ x, const float* __restrict__ a_scale,
    const unsigned char* __restrict__ w1, const float* __restrict__ fc1_scale,
    const int* __restrict__ tok, const int* __restrict__ cnt, const int* __restrict__ off,
    float* __restrict__ z, int N, int K, int H, int I) {
    const int e = blockIdx.z;
    const int rows = cnt[e];
    const int nbh = (H + 127) / 128, nbi2 = (2 * I + 127) / 128;
    const int j0 = blockIdx.x * 64;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const int bj = j0 + (lr & 63);
    const int bn = lr < 64 ? bj : I + bj;
    const unsigned char* brow = bj < I ? w1 + ((long long)e * 2 * I + bn) * H : nullptr;
    const float* bscale = fc1_scale + ((long long)e * nbi2 + bn / 128) * nbh;
    for (int m0 = blockIdx.y * BM; m0 < rows; m0 += gridDim.y * BM) {
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
        const int am = m0 + lr;
        const int t = am < rows ? tok[(long long)e * N + am] / K : -1;
        const unsigned char* arow = t >= 0 ? x + (long long)t * H : nullptr;
        const float* ascale = t >= 0 ? a_scale + (long long)t * nbh : nullptr;
        for (int k0 = 0; k0 < H; k0 += BK) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int k = k0 + lk + q;
                As[lk + q][lr] = (arow && k < H) ? __fmul_rn(fnuz_to_f(arow[k]), ascale[k / 128]) : 0.0f;
                Bs[lk + q][lr] = (brow && k < H) ? __fmul_rn(fnuz_to_f(brow[k]), bscale[k / 128]) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float a[8], b[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 8; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int m = m0 + ty + 16 * i;
            if (m >= rows) continue;
            const long long p = off[e] + m;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = j0 + tx + 16 * j;
                if (col < I) z[p * I + col] = __fmul_rn(silu_f(acc[i][j]), acc[i][j + 4]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) fp8moe_gemm2_ref(
    const float* __restrict__ z, const unsigned char* __restrict__ w2, const float* __restrict__ fc2_scale,
    const int* __restrict__ cnt, const int* __restrict__ off, float* __restrict__ y, int H, int I) {
    const int e = blockIdx.z;
    const int rows = cnt[e];
    const int nbi = (I + 127) / 128, nbh = (H + 127) / 128;
    const int n0 = blockIdx.x * BN;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const long long pbase = off[e];
    const int bd = n0 + lr;
    const unsigned char* brow = bd < H ? w2 + ((long long)e * H + bd) * I : nullptr;
    const float* bscale = fc2_scale + ((long long)e * nbh + bd / 128) * nbi;
    for (int m0 = blockIdx.y * BM; m0 < rows; m0 += gridDim.y * BM) {
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
        const float* arow = (m0 + lr < rows) ? z + (pbase + m0 + lr) * I : nullptr;
        for (int k0 = 0; k0 < I; k0 += BK) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int k = k0 + lk + q;
                As[lk + q][lr] = (arow && k < I) ? arow[k] : 0.0f;
                Bs[lk + q][lr] = (brow && k < I) ? __fmul_rn(fnuz_to_f(brow[k]), bscale[k / 128]) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float a[8], b[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 8; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int m = m0 + ty + 16 * i;
            if (m >= rows) continue;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int d = n0 + tx + 16 * j;
                if (d < H) y[(pbase + m) * H + d] = acc[i][j];
            }
        }
    }
}

extern "C" __global__ void fp8moe_combine_ref(unsigned char* __restrict__ out, const float* __restrict__ y,
                                              const int* __restrict__ ids, const float* __restrict__ w,
                                              const int* __restrict__ slot_pos, const int* __restrict__ off,
                                              int T, int H, int K) {
    const long long n = (long long)T * H;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long t = idx / H;
        const int d = (int)(idx % H);
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            const long long f = t * K + k;
            const long long p = (long long)off[ids[f]] + slot_pos[f];
            const float v = __fmul_rn(w[f], y[p * H + d]);
            acc = k == 0 ? v : __fadd_rn(acc, v);
        }
        out[idx] = f_to_fnuz(acc);
    }
}
