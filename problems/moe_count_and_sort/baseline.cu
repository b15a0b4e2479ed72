/* atrex:plan
[[launch]]
kernel = "count_and_sort"
grid = [1]
block = ["THREADS"]
args = ["topk_ids", "sorted_token_ids", "expert_token_counts", "cumsum", "T*K:i32", "E:i32"]

[tune]
THREADS = [1024, 512, 256]

[defines]
THREADS = 1024
*/
// Baseline stable counting sort in one block (N = T·K ≤ 16352 in every shape; E ≤ 128):
// 1. histogram in shared memory (integer atomics: the counts do not depend on their order);
// 2. exclusive scan of the counts → cumsum (and the counts) written out;
// 3. stable placement chunk by chunk (blockDim slots at a time, in order): inside a warp the
//    rank among equal ids comes from __match_any_sync, across warps from per-(warp, expert)
//    counts in shared memory, across chunks from a running per-expert cursor.
#define MAXE 128

extern "C" __global__ void __launch_bounds__(THREADS) count_and_sort(
    const int* __restrict__ ids, int* __restrict__ sorted, int* __restrict__ counts, int* __restrict__ cumsum, int N, int E) {
    __shared__ int cur[MAXE];
    __shared__ int wpre[THREADS / 32][MAXE];  // per warp, per expert
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = THREADS / 32;
    for (int e = tid; e < E; e += THREADS) cur[e] = 0;
    __syncthreads();
    for (int f = tid; f < N; f += THREADS) {
        const int e = ids[f];
        if (e >= 0 && e < E) atomicAdd(&cur[e], 1);
    }
    __syncthreads();
    if (tid == 0) {
        int s = 0;
        cumsum[0] = 0;
        for (int e = 0; e < E; ++e) {
            const int c = cur[e];
            counts[e] = c;
            cur[e] = s;
            s += c;
            cumsum[e + 1] = s;
        }
    }
    __syncthreads();
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
        // exclusive prefix over warps, per expert; cursor advanced by the chunk's total
        for (int x = tid; x < E; x += THREADS) {
            int s = cur[x];
            for (int w = 0; w < nw; ++w) { const int c = wpre[w][x]; wpre[w][x] = s; s += c; }
            cur[x] = s;
        }
        __syncthreads();
        if (ok) sorted[wpre[warp][e] + rank] = f;
        __syncthreads();
    }
}
