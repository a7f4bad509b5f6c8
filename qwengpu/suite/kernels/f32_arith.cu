// f32_arith: f32 add/sub/mul/div (rn), neg, fabsf, incl. subnormals, infinities and signed zeros.
__global__ void f32_arith(const float *a, const float *b, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i], y = b[i];
    float *o = out + 6 * i;
    o[0] = __fadd_rn(x, y);
    o[1] = __fsub_rn(x, y);
    o[2] = __fmul_rn(x, y);
    o[3] = x / y;              // div.rn.f32 (IEEE division without -use_fast_math)
    o[4] = -x;
    o[5] = fabsf(y);
}
