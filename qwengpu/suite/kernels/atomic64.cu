// atomic64: 64-bit atomics on global memory: atomicAdd (unsigned long long, with carries out of the low word),
// atomicMin/Max (long long), atomicAnd/Or/Xor, and atomicExch/atomicCAS on each thread's own slot.
__global__ void atomic64(const long long *x, unsigned long long *acc, long long *mm, unsigned long long *slots,
                         unsigned long long *rets) {
    int i = threadIdx.x;
    long long v = x[i];
    unsigned long long u = (unsigned long long)v;
    atomicAdd(&acc[0], u);
    atomicAnd(&acc[1], u | 0xff00ff00ff00ff00ull);
    atomicOr(&acc[2], u & 0x0f0f0f0f0f0f0f0full);
    atomicXor(&acc[3], u);
    atomicMin(&mm[0], v);
    atomicMax(&mm[1], v);
    unsigned long long old = atomicExch(&slots[2 * i], u);
    rets[2 * i] = old;
    rets[2 * i + 1] = atomicCAS(&slots[2 * i + 1], old, old + u);   // succeeds only where the slot holds `old`
}
