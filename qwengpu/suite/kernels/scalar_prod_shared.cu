// scalar_prod_shared: the shape of NVIDIA's scalarProd sample on qwenGPU's course machine: each block
// takes vector pairs (grid-stride), every thread adds products into its own slots of a 1,024-float
// (4 KiB) accumulator array in shared memory, and a tree of barriers halves it to the pair's dot product.
#define SLOTS 1024

__global__ void scalar_prod_shared(float *out, const float *a, const float *b, int pairs, int length) {
    __shared__ float partial[SLOTS];
    for (int pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
        const float *x = a + pair * length;
        const float *y = b + pair * length;
        // slot s sums the products at s, s + SLOTS, s + 2 * SLOTS, ... of the pair
        for (int s = threadIdx.x; s < SLOTS; s += blockDim.x) {
            float acc = 0.0f;
            for (int i = s; i < length; i += SLOTS) acc += x[i] * y[i];
            partial[s] = acc;
        }
        // halve the slots until one holds the sum (SLOTS is a power of two)
        for (int half = SLOTS / 2; half > 0; half >>= 1) {
            __syncthreads();
            for (int s = threadIdx.x; s < half; s += blockDim.x) partial[s] += partial[s + half];
        }
        if (threadIdx.x == 0) out[pair] = partial[0];
        __syncthreads();    // slot 0 is read before the next pair writes it
    }
}
