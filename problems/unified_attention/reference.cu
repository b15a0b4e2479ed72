/* atrex:plan
[[launch]]
kernel = "unified_attention_ref"
grid = ["ceil(max(seq_lens) / 64)", "n", "Hq"]
block = [256]
smem = "4 * (2 * 65 * D + 64 * 64 + 3 * 64)"
args = ["out", "q", "k_cache", "v_cache", "cu_seqlens_q", "seqused_k", "block_table",
        "Hq:i32", "Hk:i32", "D:i32", "bs:i32", "MB:i32"]
*/
// Reference unified_attention (vLLM triton_unified_attention on these shapes), fp32 throughout:
// for sequence i, query rows [cu_i, cu_{i+1}) attend to KV positions p < seqused_k[i], position p
// at cache slot block_table[i, p // bs]·bs + p mod bs; query head h reads KV head h // (Hq/Hk);
// score = (q·k) / sqrt(D); causal top-left mask (key p ≤ row r) only when q_len == kv_len, else
// no mask; softmax in fp32; out = bf16(Σ p·v / Σ p).
//
// Plain SIMT tiling so that the largest shapes (49k tokens; 2·10¹³ FLOPs in attention_forward's
// twin) finish in seconds: one block of 256 threads per (64 query rows, sequence, query head),
// keys in tiles of 64 staged in shared memory as fp32, exact online softmax (running max and
// sum, rescaling the fp32 accumulators), no bf16 rounding anywhere but the output.
#include <cuda_bf16.h>
#include <math_constants.h>

#define BQ 64
#define BK 64
#define LDT 65  // padded stride of the transposed (d-major) tiles

template <int NJ>
__device__ __forceinline__ void attend(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
                                       const __nv_bfloat16* __restrict__ k_cache,
                                       const __nv_bfloat16* __restrict__ v_cache,
                                       const int* __restrict__ cu_seqlens_q, const int* __restrict__ seqused_k,
                                       const int* __restrict__ block_table, int Hq, int Hk, int D, int bs, int MB) {
    extern __shared__ float sm[];
    float* Qs = sm;               // [D][LDT]: Qs[d*LDT + r]
    float* KV = Qs + D * LDT;     // K as [D][LDT], then V as [BK][D]
    float* Ps = KV + D * LDT;     // [BQ][BK] scores, then probabilities
    float* m_s = Ps + BQ * BK;    // running max per row
    float* l_s = m_s + BQ;        // running sum per row
    float* a_s = l_s + BQ;        // rescale factor of the current tile

    const int seq = blockIdx.y, h = blockIdx.z;
    const int q0 = cu_seqlens_q[seq];
    const int q_len = cu_seqlens_q[seq + 1] - q0;
    const int kv_len = seqused_k[seq];
    const int r0 = blockIdx.x * BQ;
    if (q_len <= 0 || r0 >= q_len) return;
    const bool causal = (q_len == kv_len);
    const int g = h / (Hq / Hk);
    const float scale = 1.0f / sqrtf((float)D);
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int* bt = block_table + (long long)seq * MB;

    for (int idx = tid; idx < BQ * D; idx += blockDim.x) {
        const int r = idx / D, d = idx % D, row = r0 + r;
        Qs[d * LDT + r] = row < q_len ? __bfloat162float(q[((long long)(q0 + row) * Hq + h) * D + d]) : 0.0f;
    }
    if (tid < BQ) {
        m_s[tid] = -CUDART_INF_F;
        l_s[tid] = 0.0f;
    }
    float acc[4][NJ];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NJ; ++j) acc[i][j] = 0.0f;

    const int kv_end = causal ? min(kv_len, r0 + BQ) : kv_len;
    for (int k0 = 0; k0 < kv_end; k0 += BK) {
        __syncthreads();  // the previous tile's V and probabilities are consumed
        for (int idx = tid; idx < BK * D; idx += blockDim.x) {
            const int c = idx / D, d = idx % D, p = k0 + c;
            float kv = 0.0f;
            if (p < kv_len) {
                const long long slot = (long long)bt[p / bs] * bs + p % bs;
                kv = __bfloat162float(k_cache[(slot * Hk + g) * D + d]);
            }
            KV[d * LDT + c] = kv;
        }
        __syncthreads();
        {
            float s[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
            for (int d = 0; d < D; ++d) {
                float a[4], b[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) a[i] = Qs[d * LDT + ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; ++j) b[j] = KV[d * LDT + tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) s[i][j] = fmaf(a[i], b[j], s[i][j]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int r = r0 + ty + 16 * i, p = k0 + tx + 16 * j;
                    const bool ok = p < kv_len && r < q_len && (!causal || p <= r);
                    Ps[(ty + 16 * i) * BK + tx + 16 * j] = ok ? s[i][j] * scale : -CUDART_INF_F;
                }
            }
        }
        __syncthreads();
        for (int idx = tid; idx < BK * D; idx += blockDim.x) {
            const int c = idx / D, d = idx % D, p = k0 + c;
            float vv = 0.0f;
            if (p < kv_len) {
                const long long slot = (long long)bt[p / bs] * bs + p % bs;
                vv = __bfloat162float(v_cache[(slot * Hk + g) * D + d]);
            }
            KV[c * D + d] = vv;
        }
        {
            const int warp = tid / 32, lane = tid % 32;
            for (int rr = warp * (BQ / 8); rr < (warp + 1) * (BQ / 8); ++rr) {
                const float v0 = Ps[rr * BK + lane], v1 = Ps[rr * BK + lane + 32];
                float mx = fmaxf(v0, v1);
                for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                const float m_old = m_s[rr];
                const float m_new = fmaxf(m_old, mx);
                const float base = m_new == -CUDART_INF_F ? 0.0f : m_new;
                const float p0 = expf(v0 - base), p1 = expf(v1 - base);
                float sum = p0 + p1;
                for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
                Ps[rr * BK + lane] = p0;
                Ps[rr * BK + lane + 32] = p1;
                __syncwarp();
                if (lane == 0) {
                    const float alpha = expf(m_old - base);
                    m_s[rr] = m_new;
                    l_s[rr] = l_s[rr] * alpha + sum;
                    a_s[rr] = alpha;
                }
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float alpha = a_s[ty + 16 * i];
#pragma unroll
            for (int j = 0; j < NJ; ++j) acc[i][j] *= alpha;
        }
        for (int c = 0; c < BK; ++c) {
            float a[4], b[NJ];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = Ps[(ty + 16 * i) * BK + c];
#pragma unroll
            for (int j = 0; j < NJ; ++j) b[j] = KV[c * D + min(tx + 16 * j, D - 1)];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < NJ; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = ty + 16 * i, row = r0 + r;
        if (row >= q_len) continue;
        const float inv = 1.0f / l_s[r];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
            const int d = tx + 16 * j;
            if (d < D) out[((long long)(q0 + row) * Hq + h) * D + d] = __float2bfloat16_rn(acc[i][j] * inv);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
unified_attention_ref(__nv_bfloat16* out, const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                      const __nv_bfloat16* v_cache, const int* cu_seqlens_q, const int* seqused_k,
                      const int* block_table, int Hq, int Hk, int D, int bs, int MB) {
    switch ((D + 15) / 16) {
        case 1: case 2: case 3: case 4:
            attend<4>(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, Hq, Hk, D, bs, MB); break;
        case 5: attend<5>(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, Hq, Hk, D, bs, MB); break;
        case 6: case 7: case 8:
            attend<8>(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, Hq, Hk, D, bs, MB); break;
        case 9: case 10: case 11: case 12:
            attend<12>(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, Hq, Hk, D, bs, MB); break;
        case 13: case 14: case 15: case 16:
            attend<16>(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, Hq, Hk, D, bs, MB); break;
        default: __trap();
    }
}
