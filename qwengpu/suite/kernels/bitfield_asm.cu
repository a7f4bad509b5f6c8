// bitfield_asm: bfe.u32/bfe.s32/bfi.b32 with runtime pos/len (incl. len 0 and pos+len > 32).
// nvcc 13 never emits bfe/bfi for sm_75 from C code (it uses shr/and), so inline PTX is used deliberately.
__global__ void bitfield_asm(const unsigned *a, const unsigned *b, const unsigned *pos, const unsigned *len, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = a[i], y = b[i], p = pos[i], l = len[i], u, s, f;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(u) : "r"(x), "r"(p), "r"(l));
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(s) : "r"(x), "r"(p), "r"(l));
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(f) : "r"(y), "r"(x), "r"(p), "r"(l));
    out[3 * i + 0] = u;
    out[3 * i + 1] = s;
    out[3 * i + 2] = f;
}
