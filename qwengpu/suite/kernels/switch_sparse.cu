// switch_sparse: a sparse switch (compare tree) with fallthrough and default.
__global__ void switch_sparse(const int *x, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i], r = 0;
    switch (v) {
        case -5:   r = 11; break;
        case 1:    r = v + 100;          // fallthrough
        case 10:   r += 7; break;
        case 100:  r = v * v; break;
        case 1000: r = -v; break;
        default:   r = v & 0xff;
    }
    out[i] = r;
}
