// matvec: y = A x for a 4x6 float matrix, one row per lane, explicit fma chain (__fmaf_rn) with __restrict__ (ld.global.nc).
__global__ void matvec(const float *__restrict__ A, const float *__restrict__ x, float *__restrict__ y, int cols) {
    int r = threadIdx.x;
    float acc = 0.0f;
    for (int c = 0; c < cols; c++)
        acc = __fmaf_rn(A[r * cols + c], x[c], acc);
    y[r] = acc;
}
