// f32_minmax_nan: fminf/fmaxf with NaN operands, isnan/isinf/isfinite, ordered vs unordered compares, selp on floats.
__global__ void f32_minmax_nan(const float *a, const float *b, float *fout, int *flags) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i], y = b[i];
    fout[3 * i + 0] = fminf(x, y);
    fout[3 * i + 1] = fmaxf(x, y);
    fout[3 * i + 2] = (x > y) ? x : y;        // not fmaxf: a NaN compare is false
    int f = 0;
    f |= isnan(x) ? 1 : 0;
    f |= isinf(y) ? 2 : 0;
    f |= isfinite(x) ? 4 : 0;
    f |= (x < y) ? 8 : 0;
    f |= (x == y) ? 16 : 0;
    f |= (x != y) ? 32 : 0;                   // unordered-or-not-equal: true with NaN
    f |= !(x >= y) ? 64 : 0;
    f |= (x <= y) ? 128 : 0;
    flags[i] = f;
}
