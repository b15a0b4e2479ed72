/* atrex:plan
[[launch]]
kernel = "attention_forward_inputs"
grid = [1]
block = [256]
args = ["cu_seqlens_q", "cu_seqlens_k", "n:i32",
        "seq_lens[0]:i32", "seq_lens[min(1, n - 1)]:i32", "seq_lens[min(2, n - 1)]:i32",
        "seq_lens[min(3, n - 1)]:i32", "seq_lens[min(4, n - 1)]:i32", "seq_lens[min(5, n - 1)]:i32",
        "seq_lens[min(6, n - 1)]:i32", "seq_lens[min(7, n - 1)]:i32",
        "min(seq_lens):i32", "max(seq_lens):i32"]
*/
// Structured inputs of attention_forward (the spec, section 3): cu_seqlens_q = cu_seqlens_k =
// 0, L_0, L_0+L_1, …, T. The launch plan cannot pass a list, so the lengths arrive as the first
// 8 entries of seq_lens plus min/max: with n ≤ 8 every length is known; with n > 8 all lengths
// must be equal (every shape of the suite has n = 1), otherwise the generator traps.
// Deterministic: q, k and v come from the built-in generators.

extern "C" __global__ void attention_forward_inputs(int* cu_seqlens_q, int* cu_seqlens_k, int n,
                                                    int l0, int l1, int l2, int l3, int l4, int l5,
                                                    int l6, int l7, int lmin, int lmax) {
    const int first[8] = {l0, l1, l2, l3, l4, l5, l6, l7};
    if (n > 8 && lmin != lmax) __trap();
    for (int i = threadIdx.x; i <= n; i += blockDim.x) {
        long long cu = 0;
        if (n <= 8) {
            for (int k = 0; k < i; ++k) cu += first[k];
        } else {
            cu = (long long)i * lmin;
        }
        cu_seqlens_q[i] = (int)cu;
        cu_seqlens_k[i] = (int)cu;
    }
}
