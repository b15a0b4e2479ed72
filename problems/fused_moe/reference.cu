/* atrex:plan
[[launch]]
kernel = "moe_route_ref"
grid = ["E"]
block = [1024]
args = ["topk_ids", "topk_weights", "tok", "wgt", "slot_pos", "cnt", "T:i32", "K:i32"]

[[launch]]
kernel = "moe_offsets_ref"
grid = [1]
block = [32]
args = ["cnt", "off", "E:i32"]

[[launch]]
kernel = "moe_gemm1_ref"
grid = ["ceil(I / 64)", "ceil(T / 128)", "E"]
block = [256]
args = ["hidden_states", "w1", "tok", "cnt", "off", "z", "T:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "moe_gemm2_ref"
grid = ["ceil(H / 128)", "ceil(T / 128)", "E"]
block = [256]
args = ["z", "w2", "cnt", "off", "y", "T:i32", "H:i32", "I:i32"]

[[launch]]
kernel = "moe_combine_ref"
grid = ["min(ceil(T * H / 256), 1048576)"]
block = [256]
args = ["out", "y", "topk_ids", "wgt", "slot_pos", "off", "T:i32", "H:i32", "K:i32"]

[[scratch]]
name = "tok"
dtype = "int32"
size = "E * T"

[[scratch]]
name = "wgt"
dtype = "fp32"
size = "E * T"

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
size = "T * min(K, E) * I"

[[scratch]]
name = "y"
dtype = "fp32"
size = "T * min(K, E) * H"
*/
// Reference fused MoE (spec: fp32 math throughout, TF32 off).
// 1. route: one block per expert e collects, in increasing token order, the tokens whose row
//    contains e (duplicate slots merged: ω = Σ of their weights in slot order); the first slot
//    of each (token, expert) pair records its position in e's list, later duplicates record −1.
// 2. offsets: prefix sum of the per-expert counts (pair p = off[e] + position).
// 3. gemm1: per expert, a = W1[e]·x[t] for its tokens; z = silu(a[:I]) ⊙ a[I:], fp32.
// 4. gemm2: y = W2[e]·z, fp32.
// 5. combine: out[t] = Σ over the row's distinct experts in increasing id of ω·y (fp32 mul, add).
// Every dot product is one fp32 FMA chain in increasing reduction index (128×128 tiles, 8×8
// per thread, k-steps of 8 through shared memory); exp is computed in double and rounded.
#include <cuda_bf16.h>

__device__ __forceinline__ float silu_f(float g) {
    const float e = (float)exp(-(double)g);
    return __fdiv_rn(g, __fadd_rn(1.0f, e));
}

// Block-wide ordered compaction helper: exclusive position of this thread's flag among the
// block's flags (in thread order) and the block total.
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
    const int r = warp_tot[warp] + pre;
    return r;
}

extern "C" __global__ void moe_route_ref(const int* __restrict__ ids, const float* __restrict__ w,
                                         int* tok, float* wgt, int* slot_pos, int* cnt, int T, int K) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    int base = 0;
    for (int t0 = 0; t0 < T; t0 += blockDim.x) {
        const int t = t0 + threadIdx.x;
        int first = -1;
        float om = 0.0f;
        if (t < T) {
            for (int k = 0; k < K; ++k) {
                if (ids[(long long)t * K + k] == e) {
                    if (first < 0) { first = k; om = w[(long long)t * K + k]; }
                    else { om = __fadd_rn(om, w[(long long)t * K + k]); slot_pos[(long long)t * K + k] = -1; }
                }
            }
        }
        const int r = block_excl_scan(first >= 0, warp_tot, &total);
        if (first >= 0) {
            tok[(long long)e * T + base + r] = t;
            wgt[(long long)e * T + base + r] = om;
            slot_pos[(long long)t * K + first] = base + r;
        }
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) cnt[e] = base;
}

extern "C" __global__ void moe_offsets_ref(const int* cnt, int* off, int E) {
    if (threadIdx.x == 0) {
        int s = 0;
        for (int e = 0; e < E; ++e) { off[e] = s; s += cnt[e]; }
        off[E] = s;
    }
}

#define BM 128
#define BN 128
#define BK 8

// gemm1: rows = tokens of expert e, columns = 64 z columns (64 gate rows + 64 up rows of W1).
extern "C" __global__ void __launch_bounds__(256) moe_gemm1_ref(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w1,
    const int* __restrict__ tok, const int* __restrict__ cnt, const int* __restrict__ off,
    float* __restrict__ z, int T, int H, int I) {
    const int e = blockIdx.z;
    const int rows = cnt[e];
    const int m0 = blockIdx.y * BM;
    if (m0 >= rows) return;
    const int j0 = blockIdx.x * 64;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    // Loader: thread loads 4 consecutive k of one row of A and of B.
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const int am = m0 + lr;
    const __nv_bfloat16* arow = (am < rows) ? x + (long long)tok[(long long)e * T + am] * H : nullptr;
    const int bj = j0 + (lr & 63);
    const __nv_bfloat16* brow = nullptr;
    if (bj < I) brow = w1 + ((long long)e * 2 * I + (lr < 64 ? bj : I + bj)) * H;
    for (int k0 = 0; k0 < H; k0 += BK) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int k = k0 + lk + q;
            As[lk + q][lr] = (arow && k < H) ? __bfloat162float(arow[k]) : 0.0f;
            Bs[lk + q][lr] = (brow && k < H) ? __bfloat162float(brow[k]) : 0.0f;
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
    // Columns tx + 16j: j < 4 gate, j ≥ 4 up of the same z column tx + 16(j − 4).
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

// gemm2: y[p, d] = Σ_i W2[e, d, i] · z[p, i].
extern "C" __global__ void __launch_bounds__(256) moe_gemm2_ref(
    const float* __restrict__ z, const __nv_bfloat16* __restrict__ w2, const int* __restrict__ cnt,
    const int* __restrict__ off, float* __restrict__ y, int T, int H, int I) {
    const int e = blockIdx.z;
    const int rows = cnt[e];
    const int m0 = blockIdx.y * BM;
    if (m0 >= rows) return;
    const int n0 = blockIdx.x * BN;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    const long long pbase = off[e];
    const float* arow = (m0 + lr < rows) ? z + (pbase + m0 + lr) * I : nullptr;
    const __nv_bfloat16* brow = (n0 + lr < H) ? w2 + ((long long)e * H + n0 + lr) * I : nullptr;
    for (int k0 = 0; k0 < I; k0 += BK) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int k = k0 + lk + q;
            As[lk + q][lr] = (arow && k < I) ? arow[k] : 0.0f;
            Bs[lk + q][lr] = (brow && k < I) ? __bfloat162float(brow[k]) : 0.0f;
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
                for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(b[j], a[i], acc[i][j]);
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

extern "C" __global__ void moe_combine_ref(float* __restrict__ out, const float* __restrict__ y,
                                           const int* __restrict__ ids, const float* __restrict__ wgt,
                                           const int* __restrict__ slot_pos, const int* __restrict__ off,
                                           int T, int H, int K) {
    const long long n = (long long)T * H;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const int t = (int)(idx / H), d = (int)(idx % H);
        int ex[16];
        long long pp[16];
        float om[16];
        int c = 0;
        for (int k = 0; k < K && k < 16; ++k) {
            const int pos = slot_pos[(long long)t * K + k];
            if (pos < 0) continue;
            const int e = ids[(long long)t * K + k];
            // insertion in increasing expert id
            int j = c++;
            while (j > 0 && ex[j - 1] > e) { ex[j] = ex[j - 1]; pp[j] = pp[j - 1]; om[j] = om[j - 1]; --j; }
            ex[j] = e;
            pp[j] = (long long)off[e] + pos;
            om[j] = wgt[(long long)e * T + pos];
        }
        float acc = 0.0f;
        for (int j = 0; j < c; ++j) acc = __fadd_rn(acc, __fmul_rn(om[j], y[pp[j] * H + d]));
        out[idx] = acc;
    }
}
