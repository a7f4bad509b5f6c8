// histogram64_shared: the shape of NVIDIA's histogram64 sample on qwenGPU's course machine: 64-bin
// histogram of bytes (bin = byte >> 2) in blocks of 64 threads, each thread counting into its own
// byte-sized sub-histogram in 4 KiB of shared memory (no atomics there), then thread b summing bin b
// over the block's 64 sub-histograms into the block's partial histogram and the grid's total.
#define BINS 64
#define THREADS 64

__global__ void histogram64_shared(unsigned *partial, unsigned *total, const unsigned *words, int count) {
    // counts[bin][thread]: a thread's counters are a column, so each thread writes only its own bytes
    __shared__ unsigned char counts[BINS * THREADS];
    int t = threadIdx.x;
    for (int bin = 0; bin < BINS; ++bin) counts[bin * THREADS + t] = 0;
    __syncthreads();
    for (int i = blockIdx.x * THREADS + t; i < count; i += gridDim.x * THREADS) {
        unsigned w = words[i];
        for (int k = 0; k < 4; ++k) counts[((w >> (8 * k + 2)) & 63u) * THREADS + t] += 1;   // <= 255 per thread
    }
    __syncthreads();
    unsigned sum = 0;
    for (int u = 0; u < THREADS; ++u) sum += counts[t * THREADS + u];
    partial[blockIdx.x * BINS + t] = sum;
    atomicAdd(&total[t], sum);
}
