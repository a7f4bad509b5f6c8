// dynamic_shared: extern __shared__ array (size from the launch's shared_bytes): reverse 8 ints across 2 warps.
__global__ void dynamic_shared(const int *x, int *out) {
    extern __shared__ int buf[];
    int t = threadIdx.x, n = blockDim.x;
    buf[t] = x[t];
    __syncthreads();
    out[t] = buf[n - 1 - t] + buf[t];
}
