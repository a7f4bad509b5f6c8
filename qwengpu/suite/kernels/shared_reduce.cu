// shared_reduce: tree sum in shared memory with __syncthreads, 8 threads (2 warps) per block, 2 blocks.
__global__ void shared_reduce(const int *x, int *out) {
    __shared__ int s[8];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 8 + t];
    __syncthreads();
    for (int stride = 4; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
