// bit_count: __brev/__clz/__popc/__ffs and the 64-bit __brevll/__clzll/__popcll/__ffsll (brev, clz, popc, bfind).
__global__ void bit_count(const unsigned *a, const unsigned long long *b, int *out, unsigned long long *rev64) {
    int i = threadIdx.x;
    unsigned x = a[i];
    unsigned long long y = b[i];
    int *o = out + 7 * i;
    o[0] = (int)__brev(x);
    o[1] = __clz((int)x);
    o[2] = __popc(x);
    o[3] = __ffs((int)x);
    o[4] = __clzll((long long)y);
    o[5] = __popcll(y);
    o[6] = __ffsll((long long)y);
    rev64[i] = __brevll(y);
}
