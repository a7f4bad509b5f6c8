// local_array: a per-thread array indexed by runtime values (stays in .local memory): scatter, then gather.
__global__ void local_array(const int *x, const int *idx, int *out) {
    int i = threadIdx.x;
    int buf[8];
    for (int k = 0; k < 8; k++) buf[k] = x[i * 8 + k];
    for (int k = 0; k < 4; k++) {
        int j = idx[i * 4 + k] & 7;
        buf[j] += buf[(j + 1) & 7] * 2;      // runtime-indexed read-modify-write
    }
    int acc = 0;
    for (int k = 0; k < 3; k++) acc = acc * 10 + buf[idx[(i + k) & 3] & 7];
    out[i] = acc;
}
