// vote: __any_sync/__all_sync/__ballot_sync over 4 lanes, and __activemask/__ballot_sync inside divergent branches.
__global__ void vote(const int *x, unsigned *out) {
    int lane = threadIdx.x;
    int v = x[blockIdx.x * 4 + lane];
    unsigned *o = out + blockIdx.x * 16 + 4 * lane;
    o[0] = __ballot_sync(0xf, v > 0);
    o[1] = (unsigned)__any_sync(0xf, v > 10) | ((unsigned)__all_sync(0xf, v != 0) << 1);
    if (v & 1) {                                   // divergent: odd lanes only
        unsigned m = __activemask();
        o[2] = m;
        o[3] = __ballot_sync(m, v > 5);
    } else {
        unsigned m = __activemask();
        o[2] = m << 4;
        o[3] = (unsigned)__all_sync(m, v >= 0);
    }
}
