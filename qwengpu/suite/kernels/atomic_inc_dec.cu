// atomic_inc_dec: atomicInc/atomicDec (atom.inc/dec.u32) -- wrap-around counters modulo limit+1, which stay
// order independent while the start value is <= limit; also a far-from-wrap counter.
__global__ void atomic_inc_dec(unsigned *c, const unsigned *limits) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicInc(&c[0], limits[0]);             // modulo counter
    atomicDec(&c[1], limits[1]);             // modulo counter counting down
    atomicInc(&c[2], 0xffffffffu);           // plain increment
    if (i & 1) atomicDec(&c[3], 1000u);      // only odd threads
}
