// bitfield: bit-field extract/insert written in C (shift+mask, signed extract via shl+shr.s, insert via and/or).
__global__ void bitfield(const unsigned *a, const unsigned *b, const unsigned *pos, unsigned *out) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i], p = pos[i] & 15;
    unsigned *o = out + 5 * i;
    o[0] = (x >> 5) & 0x3f;                                   // unsigned extract, constant field
    o[1] = (unsigned)(((int)x << 10) >> 24);                   // signed extract of bits 14..21
    o[2] = (x >> p) & 0xffu;                                   // runtime position
    o[3] = (x & ~0x3f0u) | ((y & 0x3f) << 4);                  // insert 6 bits at 4
    o[4] = (x & ~(0xfu << p)) | ((y & 0xfu) << p);             // insert 4 bits at runtime pos
}
