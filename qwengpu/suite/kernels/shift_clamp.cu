// shift_clamp: PTX shl/shr with counts >= the width (defined in PTX: shl/shr.u give 0, shr.s gives
// all sign bits). C makes such shifts undefined, so this kernel uses inline PTX deliberately.
__global__ void shift_clamp(const unsigned *a, const unsigned *n, unsigned *out) {
    int i = threadIdx.x;
    unsigned x = a[i], c = n[i], l, r, s;
    asm("shl.b32 %0, %1, %2;" : "=r"(l) : "r"(x), "r"(c));
    asm("shr.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(c));
    asm("shr.s32 %0, %1, %2;" : "=r"(s) : "r"(x), "r"(c));
    out[3 * i + 0] = l;
    out[3 * i + 1] = r;
    out[3 * i + 2] = s;
}
