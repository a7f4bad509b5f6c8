// vector_add_512: c = a + b over 512 floats (6 KiB of global memory) in 8 blocks of 64 threads,
// the bounds check of CUDA's vectorAdd sample; it needs qwenGPU's course machine.
__global__ void vector_add_512(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
