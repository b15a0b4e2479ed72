/* atrex:plan
[[launch]]
kernel = "unified_attention_inputs"
grid = ["(n * MB + n + 1) // 256 + 1"]
block = [256]
args = ["cu_seqlens_q", "seqused_k", "block_table", "n:i32", "MB:i32", "bs:i32",
        "seq_lens[0]:i32", "seq_lens[min(1, n - 1)]:i32", "seq_lens[min(2, n - 1)]:i32",
        "seq_lens[min(3, n - 1)]:i32", "seq_lens[min(4, n - 1)]:i32", "seq_lens[min(5, n - 1)]:i32",
        "seq_lens[min(6, n - 1)]:i32", "seq_lens[min(7, n - 1)]:i32",
        "min(seq_lens):i32", "max(seq_lens):i32"]
*/
// Structured inputs of unified_attention (the spec, section 3):
//   cu_seqlens_q = 0, L_0, L_0+L_1, …, Tq;  seqused_k[i] = L_i;
//   block_table[i, j] = i·MB + j for j < ceil(L_i / bs), else 0 (padding, never used).
// The launch plan cannot pass a list, so the lengths arrive as the first 8 entries of seq_lens
// plus min/max: with n ≤ 8 every length is known; with n > 8 all lengths must be equal (true for
// every shape of the suite), otherwise the generator traps rather than produce a wrong structure.
// Deterministic (no random draw): q, k_cache and v_cache come from the built-in generators.

__device__ __forceinline__ int seq_len_of(int i, int n, const int* first, int lmin) {
    return n <= 8 ? first[i] : lmin;
}

extern "C" __global__ void unified_attention_inputs(int* cu_seqlens_q, int* seqused_k, int* block_table,
                                                    int n, int MB, int bs,
                                                    int l0, int l1, int l2, int l3, int l4, int l5,
                                                    int l6, int l7, int lmin, int lmax) {
    const int first[8] = {l0, l1, l2, l3, l4, l5, l6, l7};
    if (n > 8 && lmin != lmax) __trap();
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long table = (long long)n * MB;
    if (t < table) {
        const int i = (int)(t / MB), j = (int)(t % MB);
        const int L = seq_len_of(i, n, first, lmin);
        const int used = (L + bs - 1) / bs;
        block_table[t] = j < used ? i * MB + j : 0;
    } else if (t < table + n + 1) {
        const int i = (int)(t - table);
        long long cu = 0;
        if (n <= 8) {
            for (int k = 0; k < i; ++k) cu += first[k];
        } else {
            cu = (long long)i * lmin;
        }
        cu_seqlens_q[i] = (int)cu;
        if (i < n) seqused_k[i] = seq_len_of(i, n, first, lmin);
    }
}
