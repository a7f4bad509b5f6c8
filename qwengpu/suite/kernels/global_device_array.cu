// global_device_array: module-scope __device__ arrays with initialisers (.global with init), read and updated.
__device__ int weights[8] = {10, -20, 30, -40, 50, -60, 70, -80};
__device__ unsigned counter[4] = {100, 200, 300, 400};

__global__ void global_device_array(const int *x, int *out, unsigned *snapshot) {
    int i = threadIdx.x;
    out[i] = x[i] * weights[i] + weights[7 - i];
    if (i < 4) counter[i] += (unsigned)x[i];          // each thread its own slot
    __syncthreads();
    if (i < 4) snapshot[i] = counter[3 - i];
}
