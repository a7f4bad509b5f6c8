// isqrt_bisect: integer square root by bisection with 64-bit products (mul.wide.u32), fixed-trip loop + compare.
__global__ void isqrt_bisect(const unsigned *x, unsigned *out) {
    int i = threadIdx.x;
    unsigned v = x[i];
    unsigned lo = 0, hi = 65536;                 // invariant: lo*lo <= v < hi*hi
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) >> 1;
        if ((unsigned long long)mid * mid <= v) lo = mid;
        else hi = mid;
    }
    out[i] = lo;
}
