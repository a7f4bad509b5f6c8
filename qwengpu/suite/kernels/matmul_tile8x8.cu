// matmul_tile8x8: C = A * B for 16x16 floats (3 KiB of global memory) in the tiled shape of NVIDIA's
// matrixMul sample: 2x2 blocks of 8x8 threads (64 threads, qwenGPU's course machine), each staging
// an 8x8 tile of A and of B in shared memory per step along the shared dimension.
#define TILE 8

__global__ void matmul_tile8x8(float *C, const float *A, const float *B, int n) {
    __shared__ float tileA[TILE][TILE];
    __shared__ float tileB[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int step = 0; step < n / TILE; ++step) {
        tileA[ty][tx] = A[row * n + step * TILE + tx];
        tileB[ty][tx] = B[(step * TILE + ty) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
