// div_loop: y[i] = x[i] / d in a grid-stride loop, d a kernel parameter (its reciprocal worked out once, before the
// loop), n = 20 over 2 blocks of 4 threads, so each thread divides two or three times; x holds zeros, a subnormal,
// an infinity, a NaN and quotients that overflow or underflow (the lanes outside the short division's range).
__global__ void div_loop(int n, float d, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[i] / d;
}
