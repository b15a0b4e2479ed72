// Contract test: a tensor map that reaches past its buffer (one row beyond x) is refused with
// the plan's line, before anything is launched: the copy engine does not check allocations.
/* atrex:plan
[[tensor_map]]
name = "tm_x"                  # the input, [T, 2d]: gate and up halves are two boxes of one row band
tensor = "x"
dtype = "bf16"
dims = ["2 * d", "T + 1"]      # one row more than `x` holds: refused
box = ["64", "ROWS"]
l2_promotion = "256B"

[[tensor_map]]
name = "tm_out"
tensor = "out"
dtype = "bf16"
dims = ["d", "T"]
box = ["64", "ROWS"]

[[launch]]
kernel = "silu_and_mul_tma"
grid = ["d / 64", "ceil(T / ROWS)"]
block = ["128"]
cluster = ["2", "1", "1"]
smem = "3 * 64 * ROWS * 2 + 64"
args = ["tm_x", "tm_out", "d:i32"]

[tune]
ROWS = [128, 64]
*/
// The refusal comes before any launch, so the body never runs; it only has to compile with the
// plan's parameters.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

extern "C" __global__ void silu_and_mul_tma(const __grid_constant__ TensorMap tm_x,
                                            const __grid_constant__ TensorMap tm_out, int d) {}
