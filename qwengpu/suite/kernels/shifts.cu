// shifts: constant and variable shl/shr.u/shr.s, masked counts, explicit clamps for counts >= 32, 64-bit shifts.
__global__ void shifts(const unsigned *a, const unsigned *n, unsigned *out, unsigned long long *o64) {
    int i = threadIdx.x;
    unsigned x = a[i], c = n[i];
    int s = (int)x;
    unsigned *o = out + 8 * i;
    o[0] = x << 7;
    o[1] = x >> 9;
    o[2] = (unsigned)(s >> 9);                    // arithmetic shift
    o[3] = x << (c & 31);
    o[4] = x >> (c & 31);
    o[5] = (unsigned)(s >> (c & 31));
    o[6] = c >= 32 ? 0u : x << c;                 // C-defined "shift everything out"
    o[7] = (unsigned)(c >= 32 ? (s >> 31) : (s >> c));
    unsigned long long X = ((unsigned long long)x << 32) | (x ^ 0x5a5a5a5au);
    long long SX = (long long)X;
    o64[3 * i + 0] = X << (c & 63);
    o64[3 * i + 1] = X >> (c & 63);
    o64[3 * i + 2] = (unsigned long long)(SX >> (c & 63));
}
