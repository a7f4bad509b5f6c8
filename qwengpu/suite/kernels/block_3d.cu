// block_3d: a 3D block (2x2x2 = 8 threads, 2 warps) in a grid of 2 along z: threadIdx/blockDim/blockIdx/gridDim .z.
__global__ void block_3d(int *out) {
    int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    int lin = (tz * blockDim.y + ty) * blockDim.x + tx;
    int blk = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int nthreads = blockDim.x * blockDim.y * blockDim.z;
    out[blk * nthreads + lin] = tx + 10 * ty + 100 * tz + 1000 * blockIdx.z + 10000 * gridDim.z;
}
