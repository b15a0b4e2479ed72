/* atrex:plan
[[launch]]
kernel = "align_count_ref"
grid = ["E"]
block = [256]
args = ["topk_ids", "cnt", "T*K:i32"]

[[launch]]
kernel = "align_offsets_ref"
grid = [1]
block = [32]
args = ["cnt", "poff", "expert_ids", "num_tokens_post_pad", "E:i32", "BS:i32", "NB:i32"]

[[launch]]
kernel = "align_place_ref"
grid = ["E"]
block = [1024]
args = ["topk_ids", "cnt", "poff", "sorted_token_ids", "T*K:i32", "BS:i32", "NB*BS:i64"]

[[launch]]
kernel = "align_fill_ref"
grid = ["min(ceil(NB * BS / 256), 65535)"]
block = [256]
args = ["num_tokens_post_pad", "sorted_token_ids", "T*K:i32", "NB*BS:i64"]

[[scratch]]
name = "cnt"
dtype = "int32"
size = "E"

[[scratch]]
name = "poff"
dtype = "int32"
size = "E"
*/
// Reference moe_align_block_size. For e = 0…E−1 with c_e > 0: the flat indices f (= t·K + k)
// with topk_ids[f] = e in increasing order, then (−c_e mod BS) sentinels N = T·K; expert_ids
// gets e once per block; num_tokens_post_pad = [Σ_e ceil(c_e/BS)·BS].
// The output buffers have the declared length (NB = the recorded num_blocks): positions of
// sorted_token_ids past the case's own padded length hold the sentinel N, blocks of expert_ids
// past its own block count hold −1, and a case longer than the declared length is truncated
// (num_tokens_post_pad still reports the true length). Every element is written.

extern "C" __global__ void align_count_ref(const int* __restrict__ ids, int* cnt, int N) {
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
        cnt[e] = s;
    }
}

extern "C" __global__ void align_offsets_ref(const int* cnt, int* poff, int* expert_ids, int* post, int E, int BS, int NB) {
    if (threadIdx.x != 0) return;
    int s = 0;
    for (int e = 0; e < E; ++e) {
        poff[e] = s;
        const int nb = (cnt[e] + BS - 1) / BS;
        for (int b = 0; b < nb; ++b)
            if (s / BS + b < NB) expert_ids[s / BS + b] = e;
        s += nb * BS;
    }
    for (int b = s / BS; b < NB; ++b) expert_ids[b] = -1;
    post[0] = s;
}

extern "C" __global__ void align_place_ref(const int* __restrict__ ids, const int* __restrict__ cnt,
                                           const int* __restrict__ poff, int* sorted, int N, int BS, long long L) {
    __shared__ int warp_tot[32];
    __shared__ int total;
    const int e = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const long long start = poff[e];
    long long base = start;
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
        const long long pos = base + warp_tot[warp] + __popc(b & ((1u << lane) - 1u));
        if (hit && pos < L) sorted[pos] = f;
        base += total;
        __syncthreads();
    }
    // padding of this expert's last block
    const int c = cnt[e];
    const long long end = start + (long long)((c + BS - 1) / BS) * BS;
    for (long long p = start + c + threadIdx.x; p < end; p += blockDim.x)
        if (p < L) sorted[p] = N;
}

extern "C" __global__ void align_fill_ref(const int* __restrict__ post, int* sorted, int N, long long L) {
    const long long s = post[0];
    for (long long p = s + blockIdx.x * (long long)blockDim.x + threadIdx.x; p < L; p += (long long)gridDim.x * blockDim.x)
        sorted[p] = N;
}
