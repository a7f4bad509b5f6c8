// fuzz_inverted_divisor: reduced from `qwengpu fuzz` (seed 1 kernel 75, seed 2026 kernels 77 and 105): unsigned and
// signed division by a bitwise NOT (`~t`, `~x`), and a u32 -> f32 conversion of one. The machine's lowering tests
// such an operand against zero with a select on the inverted register.
#include <climits>
__global__ void fuzz_inverted_divisor(const int *x, unsigned *uq, int *iq, float *fv) {
    unsigned t = threadIdx.x;
    uq[t] = (unsigned)x[t] / ~t;
    int d = ~x[t], n = x[t + 4];
    iq[t] = (d == 0 || (n == INT_MIN && d == -1)) ? n : n / d;
    fv[t] = (float)~t;
}
