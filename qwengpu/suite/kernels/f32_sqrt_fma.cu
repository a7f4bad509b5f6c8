// f32_sqrt_fma: sqrtf (sqrt.rn), fmaf, a*b+c contracted to fma.rn by nvcc, __fmul_rn/__fadd_rn kept separate.
__global__ void f32_sqrt_fma(const float *a, const float *b, const float *c, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i], y = b[i], z = c[i];
    float *o = out + 5 * i;
    o[0] = sqrtf(fabsf(x));
    o[1] = fmaf(x, y, z);
    o[2] = x * y + z;                          // contracted: fma.rn.f32
    o[3] = __fadd_rn(__fmul_rn(x, y), z);      // two roundings
    o[4] = sqrtf(x);                           // NaN for negative x
}
