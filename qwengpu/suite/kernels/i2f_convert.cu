// i2f_convert: int/uint/long long -> float with rounding modes (cvt.rn/rz/rm/rp.f32.s32/u32/s64).
__global__ void i2f_convert(const int *a, const long long *b, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int x = a[i];
    float *o = out + 8 * i;
    o[0] = __int2float_rn(x);
    o[1] = __int2float_rz(x);
    o[2] = __int2float_rd(x);
    o[3] = __int2float_ru(x);
    o[4] = __uint2float_rn((unsigned)x);
    o[5] = __uint2float_rz((unsigned)x);
    o[6] = (float)b[i];                        // cvt.rn.f32.s64
    o[7] = __ll2float_rz(b[i]);
}
