// bitwise: and/or/xor/not, and-not and a bitwise select, 32 and 64 bit.
__global__ void bitwise(const unsigned *a, const unsigned *b, const unsigned *m, unsigned *out) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i], s = m[i];
    unsigned *o = out + 8 * i;
    o[0] = x & y;
    o[1] = x | y;
    o[2] = x ^ y;
    o[3] = ~x;
    o[4] = x & ~y;
    o[5] = (x & s) | (y & ~s);   // bitwise select
    unsigned long long X = ((unsigned long long)x << 32) | y, Y = ((unsigned long long)s << 32) | ~y;
    unsigned long long r = (X ^ Y) | (~X & 0x00ff00ff00ff00ffULL);
    o[6] = (unsigned)r;
    o[7] = (unsigned)(r >> 32);
}
