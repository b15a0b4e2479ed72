/* atrex:plan
[[launch]]
kernel = "align_block_size"
grid = [1]
block = ["THREADS"]
args = ["topk_ids", "sorted_token_ids", "expert_ids", "num_tokens_post_pad", "T*K:i32", "E:i32", "BS:i32", "NB:i32"]

[tune]
THREADS = [1024, 512, 256]

[defines]
THREADS = 1024
*/
// Baseline moe_align_block_size in one block (N = T·K ≤ 65536 in every shape; E ≤ 128):
// 1. histogram in shared memory (integer atomics; counts do not depend on order);
// 2. padded offsets (each group rounded up to BS), expert_ids (one entry per block, −1 past
//    the case's own block count), num_tokens_post_pad = the true padded length;
// 3. stable placement chunk by chunk: rank inside a warp via __match_any_sync, across warps
//    via per-(warp, expert) counts, across chunks via per-expert cursors;
// 4. padding sentinels N in each group's last block and past the case's padded length, up to
//    the declared length NB·BS (entries beyond it are truncated; see problem.toml).
#define MAXE 128

extern "C" __global__ void __launch_bounds__(THREADS) align_block_size(
    const int* __restrict__ ids, int* __restrict__ sorted, int* __restrict__ expert_ids, int* __restrict__ post,
    int N, int E, int BS, int NB) {
    __shared__ int cnt[MAXE], start[MAXE], cur[MAXE];
    __shared__ int wpre[THREADS / 32][MAXE];
    __shared__ int total;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = THREADS / 32;
    const long long L = (long long)NB * BS;
    for (int e = tid; e < E; e += THREADS) cnt[e] = 0;
    __syncthreads();
    for (int f = tid; f < N; f += THREADS) {
        const int e = ids[f];
        if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    if (tid == 0) {
        int s = 0;
        for (int e = 0; e < E; ++e) {
            start[e] = s;
            cur[e] = s;
            s += (cnt[e] + BS - 1) / BS * BS;
        }
        total = s;
        post[0] = s;
    }
    __syncthreads();
    // expert_ids: block b belongs to the expert whose padded range holds b·BS
    for (int b = tid; b < NB; b += THREADS) {
        int ex = -1;
        if ((long long)b * BS < total) {
            int lo = 0, hi = E - 1;  // last e with start[e] ≤ b·BS: the owner (empty groups after it start at its end)
            while (lo < hi) {
                const int mid = (lo + hi + 1) >> 1;
                if (start[mid] <= b * BS) lo = mid; else hi = mid - 1;
            }
            ex = lo;
        }
        expert_ids[b] = ex;
    }
    // padding: each group's tail and everything past the padded length
    for (int e = 0; e < E; ++e) {
        const long long from = start[e] + cnt[e], to = start[e] + (cnt[e] + BS - 1) / BS * BS;
        for (long long p = from + tid; p < to && p < L; p += THREADS) sorted[p] = N;
    }
    for (long long p = total + tid; p < L; p += THREADS) sorted[p] = N;
    // stable placement
    for (int f0 = 0; f0 < N; f0 += THREADS) {
        const int f = f0 + tid;
        const int e = f < N ? ids[f] : -1;
        const bool ok = e >= 0 && e < E;
        const unsigned peers = __match_any_sync(0xffffffffu, ok ? e : -1);
        const int rank = __popc(peers & ((1u << lane) - 1u));
        for (int i = tid; i < nw * MAXE; i += THREADS) wpre[i / MAXE][i % MAXE] = 0;
        __syncthreads();
        if (ok && rank == 0) wpre[warp][e] = __popc(peers);
        __syncthreads();
        for (int x = tid; x < E; x += THREADS) {
            int s = cur[x];
            for (int w = 0; w < nw; ++w) { const int c = wpre[w][x]; wpre[w][x] = s; s += c; }
            cur[x] = s;
        }
        __syncthreads();
        if (ok) {
            const int p = wpre[warp][e] + rank;
            if (p < L) sorted[p] = f;
        }
        __syncthreads();
    }
}
