/* atrex:plan
[[launch]]
kernel = "k"
grid = ["T"]
block = [32]
args = ["out", "x", "weight", "H:i32", "eps:f32"]
*/
// Hostile: a template-instantiation bomb. Every level of `Bomb` instantiates two new classes,
// so the compiler is asked for 2^40 distinct instantiations: it would run until the machine's
// memory or patience ran out. The compile is stopped at the compiler's time (or memory) limit
// and fails with a message that names the limit; the worker carries on.
#include <cuda_bf16.h>

template <int N, unsigned long long M>
struct Bomb {
    static constexpr unsigned long long value =
        Bomb<N - 1, 2 * M>::value + Bomb<N - 1, 2 * M + 1>::value;
};

template <unsigned long long M>
struct Bomb<0, M> {
    static constexpr unsigned long long value = M & 1;
};

extern "C" __global__ void k(__nv_bfloat16* out, const __nv_bfloat16* x,
                             const __nv_bfloat16* w, int H, float eps) {
    out[0] = __float2bfloat16(float(Bomb<40, 1>::value));
}
