// gcd: Euclid's algorithm with rem.u32 in a data-dependent loop; also the lcm via a 64-bit multiply.
__global__ void gcd(const unsigned *a, const unsigned *b, unsigned *g, unsigned long long *l) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i];
    while (y != 0) {
        unsigned t = x % y;
        x = y;
        y = t;
    }
    g[i] = x;
    l[i] = x ? (unsigned long long)a[i] / x * b[i] : 0ull;
}
