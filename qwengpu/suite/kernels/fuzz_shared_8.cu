// fuzz_shared_8: reduced from `qwengpu fuzz --seed 2026` kernel 0 -- 2 blocks of 8 threads (2 warps each) pass values through shared
// memory between barriers, and write seven output words each. The interpreter and the simulator agree with the
// host oracle; the compact engine faulted (an out-of-bounds global write in warp 1) where the simulator runs on.
__global__ void fuzz_shared_8(const int *ii, const long long *il, const float *fi, int *oi, long long *ol, float *of) {
    __shared__ int sh[8];
    int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + t;
    int i0 = ii[g * 3 + 0];
    int i1 = ii[g * 3 + 1];
    unsigned u0 = (unsigned)ii[g * 3 + 2] ^ 2654435769u;
    unsigned u1 = (unsigned)ii[g * 3 + 1] ^ 1013904242u;
    long long l0 = il[g * 2 + 0];
    unsigned long long q0 = (unsigned long long)il[g * 2 + 1] * 2685821657736338717ull;
    sh[t] = (int)(1546137605u << ((unsigned)(t * t) & 31));
    __syncthreads();
    i1 = sh[(t + 7) % 8];
    __syncthreads();
    oi[g * 4 + 0] = i0;
    oi[g * 4 + 1] = i1;
    oi[g * 4 + 2] = (int)u0;
    oi[g * 4 + 3] = (int)u1;
    ol[g * 2 + 0] = l0;
    ol[g * 2 + 1] = (long long)q0;
    of[g * 2 + 0] = fi[g * 3 + 0];
    of[g * 2 + 1] = fi[g * 3 + 1];
}
