// histogram: 8-bin histogram -- shared-memory atomicAdd per block, then global atomicAdd; 2 blocks of 16 threads.
__global__ void histogram(const unsigned char *data, int n, unsigned *hist) {
    __shared__ unsigned bins[8];
    int t = threadIdx.x;
    if (t < 8) bins[t] = 0;
    __syncthreads();
    for (int k = blockIdx.x * blockDim.x + t; k < n; k += gridDim.x * blockDim.x)
        atomicAdd(&bins[data[k] >> 5], 1u);
    __syncthreads();
    if (t < 8) atomicAdd(&hist[t], bins[t]);
}
