// atomic_exch_cas: atomicExch/atomicCAS on each thread's own slot (return values are order independent there),
// and a CAS loop computing an atomic wrapping product into one shared word (final value order independent).
__global__ void atomic_exch_cas(int *slots, const int *x, int *olds, unsigned *prod) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    int old = atomicExch(&slots[2 * i], v);
    int seen = atomicCAS(&slots[2 * i + 1], old, v + old);   // succeeds only where slot == old value
    olds[2 * i] = old;
    olds[2 * i + 1] = seen;
    unsigned cur = *prod, prev;
    do {
        prev = cur;
        cur = atomicCAS(prod, prev, prev * (unsigned)(2 * v + 1));
    } while (cur != prev);
}
