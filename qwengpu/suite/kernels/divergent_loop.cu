// divergent_loop: each lane loops a different number of times (0..6 trips), reconverging after the loop.
__global__ void divergent_loop(const int *n, const int *data, int *out) {
    int i = threadIdx.x;
    int trips = n[i], acc = i;
    for (int k = 0; k < trips; k++)
        acc = acc * 3 + data[(i + k) & 7];
    out[i] = acc;
}
