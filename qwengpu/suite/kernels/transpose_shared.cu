// transpose_shared: 4x4 tile transpose through a 2D shared array, 2D block of 16 threads (4 warps), 2D grid of 2x1 tiles.
__global__ void transpose_shared(const int *in, int *out, int width) {
    __shared__ int tile[4][5];                     // padded row
    int x = blockIdx.x * 4 + threadIdx.x, y = blockIdx.y * 4 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * width + x];
    __syncthreads();
    int tx = blockIdx.y * 4 + threadIdx.x, ty = blockIdx.x * 4 + threadIdx.y;
    out[ty * (gridDim.y * 4) + tx] = tile[threadIdx.x][threadIdx.y];
}
