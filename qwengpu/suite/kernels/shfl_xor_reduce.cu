// shfl_xor_reduce: butterfly all-reduce (sum and max) with __shfl_xor_sync(0xf, v, k, 4), 2 blocks of 4 threads.
__global__ void shfl_xor_reduce(const int *x, int *sum, int *mx) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int s = x[i], m = x[i];
    for (int k = 1; k < 4; k <<= 1) {
        s += __shfl_xor_sync(0xf, s, k, 4);
        m = max(m, __shfl_xor_sync(0xf, m, k, 4));
    }
    sum[i] = s;       // every lane holds the total
    mx[i] = m;
}
