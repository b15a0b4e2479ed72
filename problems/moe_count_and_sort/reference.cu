/* atrex:plan
[[launch]]
kernel = "count_ref"
grid = ["E"]
block = [256]
args = ["topk_ids", "expert_token_counts", "T*K:i32"]

[[launch]]
kernel = "cumsum_ref"
grid = [1]
block = [32]
args = ["expert_token_counts", "cumsum", "E:i32"]

[[launch]]
kernel = "place_ref"
grid = ["E"]
block = [1024]
args = ["topk_ids", "cumsum", "sorted_token_ids", "T*K:i32"]
*/
// Reference stable counting sort of routed slots by expert (flat index f = t·K + k):
// counts (block per expert), cumsum (one thread), then per expert an ordered block-wide
// compaction of the matching f in increasing order written at cumsum[e]. Ids outside [0, E)
// are never generated (they would be dropped, leaving the tail of sorted_token_ids unwritten).

extern "C" __global__ void count_ref(const int* __restrict__ ids, int* counts, int N) {
    __shared__ int red[8];
    const int e = blockIdx.x;
    int c = 0;
    for (int f = threadIdx.x; f < N; f += blockDim.x) c += ids[f] == e;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += red[w];
        counts[e] = s;
    }
}

extern "C" __global__ void cumsum_ref(const int* counts, int* cumsum, int E) {
    if (threadIdx.x == 0) {
        int s = 0;
        cumsum[0] = 0;
        for (int e = 0; e < E; ++e) { s += counts[e]; cumsum[e + 1] = s; }
    }
}

extern "C" __global__ void place_ref(const int* __restrict__ ids, const int* __restrict__ cumsum, int* sorted, int N) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int base = cumsum[e];
    for (int f0 = 0; f0 < N; f0 += blockDim.x) {
        const int f = f0 + threadIdx.x;
        const bool hit = f < N && ids[f] == e;
        const unsigned b = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) warp_tot[warp] = __popc(b);
        __syncthreads();
        if (threadIdx.x == 0) {
            int s = 0;
            for (int w = 0; w < nw; ++w) { const int c = warp_tot[w]; warp_tot[w] = s; s += c; }
            total = s;
        }
        __syncthreads();
        if (hit) sorted[base + warp_tot[warp] + __popc(b & ((1u << lane) - 1u))] = f;
        base += total;
        __syncthreads();
    }
}
