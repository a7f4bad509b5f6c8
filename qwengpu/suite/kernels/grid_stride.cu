// grid_stride: grid-stride loop over n elements (n not a multiple of the grid size), 3 blocks of 4 threads.
__global__ void grid_stride(const int *x, int n, int *out) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        out[k] = x[k] * 2 + k;
}
