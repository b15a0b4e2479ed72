/* atrex:plan
[[launch]]
kernel = "k"
grid = ["T"]
block = [32]
args = ["out", "x", "weight", "H:i32", "eps:f32"]
*/
// Hostile: includes a host file so that the compiler's error log echoes its content into the
// session and to a language model. Includes are limited to the CUDA toolkit's headers.
#include <cuda_bf16.h>
#define SECRET "/etc/passwd"
#include SECRET
#include "/etc/passwd"

extern "C" __global__ void k(__nv_bfloat16* out, const __nv_bfloat16* x,
                             const __nv_bfloat16* w, int H, float eps) {}
