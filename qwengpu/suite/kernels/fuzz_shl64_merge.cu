// fuzz_shl64_merge: reduced from `qwengpu fuzz` (seed 2026 kernel 4134, the large sizes): a 64-bit value shifted
// left by 32 on one side of a divergent branch, which nvcc does in place on the register the two sides merge
// into (`shl.b64 %rd, %rd, 32`). The shift is the old low half moved up; the machine's lowering used to write
// the new low half (0) first and then read it as the high half.
__global__ void fuzz_shl64_merge(const int *ii, const long long *il, unsigned *ou, long long *ol) {
    int t = threadIdx.x;
    int loc[8];
    for (int j = 0; j < 8; ++j) loc[j] = (j * t) ^ j;
    unsigned u0 = (unsigned)ii[t] ^ 2654435769u;
    long long l0 = il[t];
    if (-15 * t >= (-7 << (loc[(t * 3) & 7] & 31))) {
        u0 = ((unsigned)ii[t] != ~u0) ? 7u : 0u;
    } else {
        l0 = l0 << 32;
    }
    ou[t] = u0;
    ol[t] = l0;
}
