// shfl_64: shuffles of 64-bit values (long long and double become two shfl.sync.b32 each), width 4.
__global__ void shfl_64(const long long *x, const double *d, long long *out, double *dout) {
    int lane = threadIdx.x;
    long long v = x[lane];
    double f = d[lane];
    out[2 * lane] = __shfl_xor_sync(0xf, v, 1, 4);
    out[2 * lane + 1] = __shfl_down_sync(0xf, v, 1, 4) - v;
    dout[lane] = __shfl_sync(0xf, f, (lane + 3) & 3, 4);
}
