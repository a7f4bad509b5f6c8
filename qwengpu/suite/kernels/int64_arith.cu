// int64_arith: long long add/sub/mul/div/rem, shifts, compares and 32<->64-bit conversions (sign/zero extension, truncation).
__global__ void int64_arith(const long long *a, const long long *b, const int *c, long long *out, int *trunc) {
    int i = threadIdx.x;
    long long x = a[i], y = b[i];
    int k = c[i];
    long long *o = out + 8 * i;
    unsigned long long ux = (unsigned long long)x, uy = (unsigned long long)y;
    o[0] = (long long)(ux + uy);
    o[1] = (long long)(ux - uy * 3u);
    o[2] = (long long)(ux * uy);
    o[3] = x / y;
    o[4] = x % y;
    o[5] = (long long)(ux / uy);
    o[6] = x + k;                                   // sign-extended int
    o[7] = (long long)(ux + (unsigned)k) ^ (x < y ? 1LL : 2LL) ^ ((long long)(uy > ux) << 4);
    trunc[i] = (int)(x ^ (x >> 32));                // truncation to 32 bits
}
