// shfl_idx: __shfl_sync(0xf, v, src, 4) -- broadcast, rotation, and runtime source lanes >= width (taken modulo 4);
// also a float shuffle.
__global__ void shfl_idx(const int *x, const int *src, const float *f, int *out, float *fout) {
    int lane = threadIdx.x;
    int v = x[blockIdx.x * 4 + lane];
    out[blockIdx.x * 12 + 3 * lane + 0] = __shfl_sync(0xf, v, 2, 4);                 // broadcast lane 2
    out[blockIdx.x * 12 + 3 * lane + 1] = __shfl_sync(0xf, v, (lane + 1) & 3, 4);    // rotate
    out[blockIdx.x * 12 + 3 * lane + 2] = __shfl_sync(0xf, v, src[blockIdx.x * 4 + lane], 4);
    fout[blockIdx.x * 4 + lane] = __shfl_sync(0xf, f[blockIdx.x * 4 + lane], 3 - lane, 4);
}
