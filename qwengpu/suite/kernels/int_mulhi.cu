// int_mulhi: __mulhi/__umulhi, widening 32x32->64 multiplies (mul.wide), __mul24/__umul24, __mul64hi/__umul64hi.
__global__ void int_mulhi(const int *a, const int *b, int *o32, long long *o64) {
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    o32[6 * i + 0] = __mulhi(x, y);
    o32[6 * i + 1] = (int)__umulhi((unsigned)x, (unsigned)y);
    o32[6 * i + 2] = __mul24(x, y);
    o32[6 * i + 3] = (int)__umul24((unsigned)x, (unsigned)y);
    long long wx = x;
    o32[6 * i + 4] = (int)(unsigned)(((unsigned long long)(unsigned)x * (unsigned)y) >> 32);
    o32[6 * i + 5] = (int)((wx * y) >> 16);
    o64[3 * i + 0] = wx * y;                                              // mul.wide.s32
    o64[3 * i + 1] = (long long)((unsigned long long)(unsigned)x * (unsigned)y);  // mul.wide.u32
    long long X = wx * 0x10001LL + y, Y = (long long)y * 0x7fff3LL - x;
    o64[3 * i + 2] = __mul64hi(X, Y) ^ (long long)__umul64hi((unsigned long long)X, (unsigned long long)Y);
}
