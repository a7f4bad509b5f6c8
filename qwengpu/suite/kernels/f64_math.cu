// f64_math: double add/sub/mul/div/fma/sqrt and min/max (the simple f64 subset).
__global__ void f64_math(const double *a, const double *b, const double *c, double *out) {
    int i = threadIdx.x;
    double x = a[i], y = b[i], z = c[i];
    double *o = out + 7 * i;
    o[0] = __dadd_rn(x, y);
    o[1] = __dsub_rn(x, y);
    o[2] = __dmul_rn(x, y);
    o[3] = x / y;
    o[4] = fma(x, y, z);
    o[5] = sqrt(fabs(x));
    o[6] = fmax(x, z) - fmin(y, z);
}
