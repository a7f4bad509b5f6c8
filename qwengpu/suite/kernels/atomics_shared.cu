// atomics_shared: the same order-independent atomics on __shared__ memory (atom.shared), 8 threads = 2 warps.
__global__ void atomics_shared(const int *x, int *out) {
    __shared__ int s[6];
    int t = threadIdx.x;
    if (t == 0) { s[0] = 0; s[1] = 0x7fffffff; s[2] = -0x7fffffff; s[3] = -1; s[4] = 0; s[5] = 0; }
    __syncthreads();
    int v = x[t];
    atomicAdd(&s[0], v);
    atomicMin(&s[1], v);
    atomicMax(&s[2], v);
    atomicAnd(&s[3], v | 0x0f0f0000);
    atomicOr(&s[4], v & 0x00ffff00);
    atomicXor(&s[5], v);
    __syncthreads();
    if (t < 6) out[t] = s[t];
}
