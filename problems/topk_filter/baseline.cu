/* atrex:plan
[[launch]]
kernel = "topk_filter_kernel"
grid = ["T"]
block = ["BLOCK"]
smem = "4 * min(V, CACHE)"
args = ["out", "logits", "V:i32", "top_k:i32"]

[tune]
BLOCK = [512, 256, 1024]
CACHE = [8192, 0, 12288]
*/
// Baseline topk_filter: one block per row, radix select of the k'-th largest value
// (k' = min(top_k, V), duplicates counted) over order-preserving 32-bit keys, 8 bits per pass:
// a 256-bin shared-memory histogram of the keys that match the prefix found so far (integer
// atomics), then warp 0 scans the bins from the top with a warp prefix sum to find the bin that
// holds the k'-th element. Four passes give the exact key τ; a last pass writes
// x < τ ? −inf : x (ties at τ are all kept). Rows of at most CACHE floats are kept in shared
// memory after the first pass; float4 accesses when V is a multiple of 4.
#ifndef BLOCK
#define BLOCK 512
#endif
#ifndef CACHE
#define CACHE 8192
#endif

__device__ __forceinline__ unsigned int order_key(float x) {
    const unsigned int u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(unsigned int k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
topk_filter_kernel(float* __restrict__ out, const float* __restrict__ logits, int V, int top_k) {
    extern __shared__ float cache[];
    __shared__ unsigned int hist[256];
    __shared__ unsigned int s_bin, s_kk;
    const float* row = logits + (size_t)blockIdx.x * V;
    float* orow = out + (size_t)blockIdx.x * V;
    const bool cached = V <= CACHE;
    const bool vec = (V % 4) == 0;
    unsigned int kk = (unsigned int)min(top_k, V);
    unsigned int prefix = 0, mask = 0;
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        const float* src = (cached && pass > 0) ? cache : row;
        if (vec) {
            for (int i = threadIdx.x; i < V / 4; i += blockDim.x) {
                const float4 f = reinterpret_cast<const float4*>(src)[i];
                if (cached && pass == 0) reinterpret_cast<float4*>(cache)[i] = f;
                const float e[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const unsigned int k = order_key(e[q]);
                    if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 0xFFu], 1u);
                }
            }
        } else {
            for (int j = threadIdx.x; j < V; j += blockDim.x) {
                const float x = src[j];
                if (cached && pass == 0) cache[j] = x;
                const unsigned int k = order_key(x);
                if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 0xFFu], 1u);
            }
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            // lane l owns bins 255 - 8l - i, i = 0..7 (descending)
            const int lane = threadIdx.x;
            unsigned int c[8], tot = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                c[i] = hist[255 - 8 * lane - i];
                tot += c[i];
            }
            unsigned int incl = tot;  // inclusive prefix over lanes 0..lane
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned int y = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += y;
            }
            unsigned int above = incl - tot;  // elements in higher bins
            if (above < kk && kk <= incl) {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    if (above + c[i] >= kk) {
                        s_bin = 255 - 8 * lane - i;
                        s_kk = kk - above;
                        break;
                    }
                    above += c[i];
                }
            }
        }
        __syncthreads();
        prefix |= s_bin << shift;
        mask |= 0xFFu << shift;
        kk = s_kk;
        __syncthreads();  // s_bin / s_kk / hist are rewritten in the next pass
    }
    const float tau = key_value(prefix);
    const float neg_inf = __uint_as_float(0xFF800000u);
    const float* src = cached ? cache : row;
    if (vec) {
        for (int i = threadIdx.x; i < V / 4; i += blockDim.x) {
            float4 f = reinterpret_cast<const float4*>(src)[i];
            f.x = f.x < tau ? neg_inf : f.x;
            f.y = f.y < tau ? neg_inf : f.y;
            f.z = f.z < tau ? neg_inf : f.z;
            f.w = f.w < tau ? neg_inf : f.w;
            reinterpret_cast<float4*>(orow)[i] = f;
        }
    } else {
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            const float x = src[j];
            orow[j] = x < tau ? neg_inf : x;
        }
    }
}
