// f2i_convert: float -> int conversions with rounding modes (rn/rz/rd/ru), truncation, saturation of
// out-of-range values and NaN -> 0 (all defined by PTX cvt), signed/unsigned/64-bit.
__global__ void f2i_convert(const float *a, int *s, unsigned *u, long long *l) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i];
    s[5 * i + 0] = __float2int_rn(x);
    s[5 * i + 1] = __float2int_rz(x);
    s[5 * i + 2] = __float2int_rd(x);
    s[5 * i + 3] = __float2int_ru(x);
    s[5 * i + 4] = (int)x;                     // cvt.rzi.s32.f32 (saturating)
    u[3 * i + 0] = __float2uint_rd(x);
    u[3 * i + 1] = __float2uint_ru(x);
    u[3 * i + 2] = __float2uint_rn(x);
    l[i] = __float2ll_rn(x);
}
