// syncthreads_reduce: __syncthreads_count/_and/_or (bar.red.popc/and/or) across 8 threads = 2 warps, 2 blocks,
// with __launch_bounds__ (.maxntid).
__global__ void __launch_bounds__(8) syncthreads_reduce(const int *x, int *out) {
    int t = threadIdx.x;
    int v = x[blockIdx.x * 8 + t];
    int cnt = __syncthreads_count(v > 0);
    int all = __syncthreads_and(v != 0);
    int any = __syncthreads_or(v > 100);
    out[blockIdx.x * 8 + t] = cnt * 100 + (all ? 10 : 0) + (any ? 1 : 0);
}
