/* atrex:plan
[[launch]]
kernel = "topk_softmax_ref"
grid = ["ceil(T / 128)"]
block = [128]
args = ["topk_weights", "topk_ids", "gating_output", "T:i32", "E:i32", "K:i32"]
*/
// Reference moe_topk_gating_softmax: one thread per row.
// p = softmax(x) in fp32 with max subtraction: e_j = expf(x_j − m), p_j = e_j / S, where the
// sum S of the fp32 e_j is accumulated in double and rounded once to fp32 (so that the
// reference carries no summation-order error of its own).
// Top-k by selection: K rounds, each taking the next element in the order "larger logit first,
// equal logits by lower index" (softmax is monotone, so this is the order of p; ids are
// unambiguous even with equal values). topk_ids[r] = that index, topk_weights[r] = its p.
extern "C" __global__ void topk_softmax_ref(float* topk_weights, int* topk_ids, const float* x,
                                            int T, int E, int K) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float* row = x + (size_t)t * E;
    float m = row[0];
    for (int j = 1; j < E; ++j) m = fmaxf(m, row[j]);
    double sum = 0.0;
    for (int j = 0; j < E; ++j) sum += (double)expf(row[j] - m);
    const float S = (float)sum;
    float prev_v = 0.0f;
    int prev_i = -1;
    for (int r = 0; r < K; ++r) {
        int best = -1;
        float bv = 0.0f;
        for (int j = 0; j < E; ++j) {
            const float v = row[j];
            // j must come after the previous pick in the order (value desc, index asc).
            const bool after = prev_i < 0 || v < prev_v || (v == prev_v && j > prev_i);
            if (!after) continue;
            if (best < 0 || v > bv) {  // strict: the lowest index wins among equal values
                best = j;
                bv = v;
            }
        }
        topk_ids[(size_t)t * K + r] = best;
        topk_weights[(size_t)t * K + r] = expf(bv - m) / S;
        prev_v = bv;
        prev_i = best;
    }
}
