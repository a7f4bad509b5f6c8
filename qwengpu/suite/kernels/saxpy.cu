// saxpy: y = a*x + y with __fmaf_rn, bounds check with n not a multiple of the block (3 blocks of 4, n = 10).
__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fmaf_rn(a, x[i], y[i]);
}
