/* atrex:plan
[[launch]]
kernel = "topk_filter_ref"
grid = ["T"]
block = [512]
args = ["out", "logits", "V:i32", "top_k:i32"]
*/
// Reference topk_filter: one block per row. Floats are mapped to order-preserving unsigned keys;
// the k'-th largest key (k' = min(top_k, V), duplicates counted) is found bit by bit from the
// most significant bit: keep a bit set when at least k' elements have a key >= the candidate
// (32 counting passes, exact integer counts). τ is the float of that key, and
// out = x < τ ? −inf : x — every entry equal to τ is kept (a NaN would be kept too).
__device__ __forceinline__ unsigned int order_key(float x) {
    const unsigned int u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(unsigned int k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

extern "C" __global__ void topk_filter_ref(float* out, const float* logits, int V, int top_k) {
    __shared__ unsigned int warp_count[32];
    const float* row = logits + (size_t)blockIdx.x * V;
    float* orow = out + (size_t)blockIdx.x * V;
    const unsigned int kk = (unsigned int)min(top_k, V);
    unsigned int cand = 0;
    for (int bit = 31; bit >= 0; --bit) {
        const unsigned int trial = cand | (1u << bit);
        unsigned int c = 0;
        for (int j = threadIdx.x; j < V; j += blockDim.x) c += order_key(row[j]) >= trial ? 1u : 0u;
        for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
        if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = c;
        __syncthreads();
        unsigned int total = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += warp_count[w];
        __syncthreads();
        if (total >= kk) cand = trial;
    }
    const float tau = key_value(cand);
    const float neg_inf = __uint_as_float(0xFF800000u);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float x = row[j];
        orow[j] = x < tau ? neg_inf : x;
    }
}
