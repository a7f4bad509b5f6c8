// nested_divergence: an if inside an if inside a loop, with per-lane trip counts (two warps of 4).
__global__ void nested_divergence(const int *x, int *out) {
    int i = threadIdx.x;
    int v = x[i], acc = 0;
    for (int k = 0; k < (v & 3) + 2; k++) {
        if (v & 1) {
            if (k % 3 == 0) acc += v;
            else acc -= k;
        } else {
            if (k & 1) acc ^= (v << k);
            else acc += 1;
        }
        v >>= 1;
    }
    out[i] = acc;
}
