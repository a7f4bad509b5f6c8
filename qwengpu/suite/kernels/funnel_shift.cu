// funnel_shift: __funnelshift_l/_r (count mod 32) and __funnelshift_lc/_rc (count clamped to 32): shf.
__global__ void funnel_shift(const unsigned *lo, const unsigned *hi, const unsigned *n, unsigned *out) {
    int i = threadIdx.x;
    unsigned l = lo[i], h = hi[i], c = n[i];
    unsigned *o = out + 5 * i;
    o[0] = __funnelshift_l(l, h, c);
    o[1] = __funnelshift_r(l, h, c);
    o[2] = __funnelshift_lc(l, h, c);
    o[3] = __funnelshift_rc(l, h, c);
    o[4] = __funnelshift_l(l, l, 13);     // rotate left by a constant
}
