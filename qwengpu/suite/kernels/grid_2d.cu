// grid_2d: 2D grid of 2D blocks (blockIdx/blockDim/gridDim .x/.y), row-major 2D indexing.
__global__ void grid_2d(const int *in, int *out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int width = gridDim.x * blockDim.x;
    int v = in[y * width + x];
    out[y * width + x] = v * 100 + (blockIdx.y * gridDim.x + blockIdx.x) * 10 + threadIdx.y * blockDim.x + threadIdx.x;
}
