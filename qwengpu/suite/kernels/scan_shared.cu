// scan_shared: Hillis-Steele inclusive prefix sum of 8 ints in shared memory (double-buffered, 2 warps).
__global__ void scan_shared(const int *x, int *out) {
    __shared__ int buf[2][8];
    int t = threadIdx.x, cur = 0;
    buf[0][t] = x[t];
    __syncthreads();
    for (int d = 1; d < 8; d <<= 1) {
        int v = buf[cur][t];
        if (t >= d) v += buf[cur][t - d];
        buf[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
    }
    out[t] = buf[cur][t];
}
