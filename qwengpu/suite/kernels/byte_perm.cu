// byte_perm: __byte_perm (prmt.b32) with constant and runtime selectors (CUDA uses the low 3 bits of each nibble).
__global__ void byte_perm(const unsigned *a, const unsigned *b, const unsigned *sel, unsigned *out) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i];
    unsigned *o = out + 4 * i;
    o[0] = __byte_perm(x, y, 0x0123);     // byte reverse of x
    o[1] = __byte_perm(x, y, 0x5140);     // interleave low bytes
    o[2] = __byte_perm(x, y, sel[i]);
    o[3] = __byte_perm(x, 0, 0x3210 + (i & 1) * 0x4444);
}
