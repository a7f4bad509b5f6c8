// early_return: lanes leave the kernel at different points inside divergent code (two warps of 4).
__global__ void early_return(const int *x, int *out) {
    int i = threadIdx.x;
    int v = x[i];
    if (v < 0) {
        out[i] = -1;
        return;
    }
    int acc = 0;
    for (int k = 0; k < 4; k++) {
        acc += v;
        if (acc > 20) {
            out[i] = 1000 + k;
            return;
        }
        v = v * 2 - 1;
    }
    if ((acc & 3) == 0) return;      // leaves out[i] untouched
    out[i] = acc;
}
