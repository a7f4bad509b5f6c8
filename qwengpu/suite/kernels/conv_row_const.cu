// conv_row_const: the row pass of a separable convolution (the shape of NVIDIA's convolutionSeparable
// sample): a block loads its tile of the row and the apron on each side into shared memory (zeros
// beyond the row's ends), then each thread sums the taps of a __constant__ filter that the launch
// spec sets by name ("symbols", what cudaMemcpyToSymbol does). A __device__ counter, started from
// the spec, counts the apron loads that fell beyond the row; the result reads it back by name.
#define RADIUS 2
#define TAPS (2 * RADIUS + 1)
#define TILE 8

__constant__ float c_row_filter[TAPS];
__device__ unsigned int g_apron_zeros;

__global__ void conv_row_const(const float *src, float *dst, int width) {
    __shared__ float tile[TILE + 2 * RADIUS];
    int x = blockIdx.x * TILE + threadIdx.x;
    tile[RADIUS + threadIdx.x] = x < width ? src[x] : 0.0f;
    if (threadIdx.x < RADIUS) {
        int left = x - RADIUS, right = x + TILE;
        unsigned beyond = 0;
        if (left >= 0) tile[threadIdx.x] = src[left]; else { tile[threadIdx.x] = 0.0f; beyond++; }
        if (right < width) tile[RADIUS + TILE + threadIdx.x] = src[right];
        else { tile[RADIUS + TILE + threadIdx.x] = 0.0f; beyond++; }
        if (beyond) atomicAdd(&g_apron_zeros, beyond);
    }
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int k = -RADIUS; k <= RADIUS; k++)
        sum += c_row_filter[RADIUS - k] * tile[RADIUS + threadIdx.x + k];
    if (x < width) dst[x] = sum;
}
