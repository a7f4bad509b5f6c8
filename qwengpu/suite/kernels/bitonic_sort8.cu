// bitonic_sort8: bitonic sort of 8 ints in shared memory by 8 threads (2 warps), __syncthreads between stages.
__global__ void bitonic_sort8(const int *x, int *out) {
    __shared__ int s[8];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 8 + t];
    __syncthreads();
    for (int k = 2; k <= 8; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            int p = t ^ j;
            if (p > t) {
                int a = s[t], b = s[p];
                bool up = (t & k) == 0;
                if ((a > b) == up) { s[t] = b; s[p] = a; }
            }
            __syncthreads();
        }
    }
    out[blockIdx.x * 8 + t] = s[t];
}
