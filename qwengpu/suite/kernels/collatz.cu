// collatz: a data-dependent while loop (Collatz steps to reach 1), lanes leave the loop at different times.
__global__ void collatz(const unsigned *n, int *steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = n[i];
    int s = 0;
    while (v > 1) {
        v = (v & 1) ? 3 * v + 1 : v >> 1;
        s++;
    }
    steps[i] = s;
}
