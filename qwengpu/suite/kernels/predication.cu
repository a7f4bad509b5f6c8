// predication: setp/selp from ternaries, compound predicates (and/or/not of setp results), predicated stores.
__global__ void predication(const int *a, const int *b, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int x = a[i], y = b[i];
    bool p = x < y, q = (x & 1) == 0, r = (unsigned)y > 100u;
    out[4 * i + 0] = p ? x : y;
    out[4 * i + 1] = (p && q) ? x + y : ((p || r) ? x - y : 42);
    out[4 * i + 2] = (int)(p != q) + 2 * (int)(!r) + 4 * (int)(x == y);
    if (q) out[4 * i + 3] = y;             // predicated store
    else out[4 * i + 3] = ~y;
}
