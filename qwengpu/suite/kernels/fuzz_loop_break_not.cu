// fuzz_loop_break_not: reduced from `qwengpu fuzz --seed 2026` kernel 1137: a bitwise NOT inside a loop nest that
// both loops leave by `break` after one trip. The NOT must happen exactly once.
__global__ void fuzz_loop_break_not(const int *x, const float *f, unsigned *out) {
    int t = threadIdx.x;
    unsigned u = (unsigned)x[t] ^ 2654435769u;
    float v = f[t];
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 1; ++j) {
            u = ~u;
            if (((v > -2147483648.0f && v < 2147483648.0f) ? (int)v : 0) < -16) break;
        }
        break;
    }
    out[t] = u;
}
