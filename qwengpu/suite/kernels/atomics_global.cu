// atomics_global: order-independent atomicAdd/Sub/Min/Max/And/Or/Xor on global int and unsigned, 2 blocks of 4.
__global__ void atomics_global(const int *x, int *s, unsigned *u) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    atomicAdd(&s[0], v);
    atomicSub(&s[1], v);
    atomicMin(&s[2], v);
    atomicMax(&s[3], v);
    atomicMin(&u[0], (unsigned)v);
    atomicMax(&u[1], (unsigned)v);
    atomicAnd(&u[2], ~(1u << (i & 31)));
    atomicOr(&u[3], (unsigned)v & 0xff0u);
    atomicXor(&u[4], (unsigned)v);
}
