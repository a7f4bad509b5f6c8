// const_mem: __constant__ int/float tables with initialisers (ld.const), indexed by runtime values.
__constant__ int table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
__constant__ float coef[4] = {0.5f, -1.25f, 2.0f, 0.125f};

__global__ void const_mem(const int *idx, const float *x, int *out, float *fout) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = idx[i] & 15;
    out[i] = table[j] * 10 + table[(j + 5) & 15];
    fout[i] = __fmul_rn(coef[i & 3], x[i]);
}
