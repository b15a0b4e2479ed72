/* atrex:plan
[[launch]]
kernel = "mla_decode_ref"
grid = ["H", "B"]
block = [256]
smem = "4 * (Dqk + S + 2)"
args = ["out", "q", "kv_cache", "seq_lens", "H:i32", "L:i32", "Dqk:i32", "S:i32"]
*/
// Reference mla_decode_attention (DeepSeek MLA, weight-absorbed latent form): request i owns the
// packed kv_cache rows [o_i, o_i + seq_lens[i]) with o_i = Σ_{j<i} seq_lens[j]; every query head
// attends to the one shared latent head: K_s = kv_cache[o_i + s, 0, 0:Dqk] (Dqk = 576),
// V_s = kv_cache[o_i + s, 0, 0:L] (L = 512). In fp32: score = (q·K_s)/sqrt(Dqk) (1/24), prob =
// softmax over s (no mask), out = bf16(Σ_s prob·V_s).
// One block per (head, request); scores staged in shared memory (seq_len ≤ ctx_len S); max and
// sum taken sequentially by one thread, so the result is plainly deterministic.
#include <cuda_bf16.h>

extern "C" __global__ void mla_decode_ref(__nv_bfloat16* out, const __nv_bfloat16* q,
                                          const __nv_bfloat16* kv_cache, const int* seq_lens, int H,
                                          int L, int Dqk, int S) {
    extern __shared__ float sm[];
    float* qs = sm;         // [Dqk]
    float* sc = qs + Dqk;   // [S]
    float* red = sc + S;    // [2]
    const int h = blockIdx.x, i = blockIdx.y, tid = threadIdx.x;
    long long off = 0;
    for (int j = 0; j < i; ++j) off += seq_lens[j];
    const int len = seq_lens[i];
    __nv_bfloat16* o = out + ((long long)i * H + h) * L;
    if (len <= 0) {
        for (int d = tid; d < L; d += blockDim.x) o[d] = __float2bfloat16_rn(0.0f);
        return;
    }
    if (len > S) __trap();  // scores are staged for at most ctx_len positions
    const float scale = 1.0f / sqrtf((float)Dqk);
    for (int d = tid; d < Dqk; d += blockDim.x) qs[d] = __bfloat162float(q[((long long)i * H + h) * Dqk + d]);
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32, warps = blockDim.x / 32;
    for (int s = warp; s < len; s += warps) {
        const __nv_bfloat16* k = kv_cache + (off + s) * Dqk;
        float acc = 0.0f;
        for (int d = lane; d < Dqk; d += 32) acc += qs[d] * __bfloat162float(k[d]);
        for (int w = 16; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
        if (lane == 0) sc[s] = acc * scale;
    }
    __syncthreads();
    if (tid == 0) {
        float mx = sc[0];
        for (int s = 1; s < len; ++s) mx = fmaxf(mx, sc[s]);
        red[0] = mx;
    }
    __syncthreads();
    for (int s = tid; s < len; s += blockDim.x) sc[s] = expf(sc[s] - red[0]);
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (int s = 0; s < len; ++s) sum += sc[s];
        red[1] = sum;
    }
    __syncthreads();
    for (int s = tid; s < len; s += blockDim.x) sc[s] = sc[s] / red[1];
    __syncthreads();
    for (int d = tid; d < L; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < len; ++s) acc += sc[s] * __bfloat162float(kv_cache[(off + s) * Dqk + d]);
        o[d] = __float2bfloat16_rn(acc);
    }
}
