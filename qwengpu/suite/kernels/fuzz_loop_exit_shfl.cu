// fuzz_loop_exit_shfl: reduced from `qwengpu fuzz --seed 2026 --mix float` kernel 2560: the lanes leave a loop
// after different trip counts (by its condition or by a break), then shuffle a value computed after it. A lane
// that left early waits at the loop's exit for the warp's other lanes: the shuffle reads every lane's new value.
__global__ void fuzz_loop_exit_shfl(const int *ii, const float *fi, float *out, int *last) {
    int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + t;
    unsigned u0 = (unsigned)ii[g * 3 + 2] ^ 2654435769u;
    unsigned u1 = (unsigned)ii[g * 3 + 1] ^ 1013904242u;
    float f0 = fi[g * 3 + 0], f1 = fi[g * 3 + 1];
    int n = ii[g * 3 + 1];
    unsigned d = u1 << (u1 & 31u);
    for (int k = 0; k < (int)((d == 0u ? (u0 | (unsigned)t) : (u0 | (unsigned)t) % d) & 3u); ++k) {
        n = k;
        if (f0 != fmaf(f1, f0, f0)) break;
    }
    out[g] = __shfl_down_sync(0xfu, 0.71642828f / fmaf((float)g, f0, (float)g), 2, 4);
    last[g] = n;
}
