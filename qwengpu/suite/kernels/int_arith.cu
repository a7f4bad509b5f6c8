// int_arith: 32-bit add/sub/mul.lo/mad/neg with unsigned wrap-around, 2 blocks of 4 threads.
__global__ void int_arith(const unsigned *a, const unsigned *b, const unsigned *c, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = a[i], y = b[i], z = c[i];
    unsigned *o = out + 6 * i;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = x * y + z;          // mad.lo
    o[4] = 0u - x;             // neg
    o[5] = (x + 12345u) * 7u - (y << 3);
}
