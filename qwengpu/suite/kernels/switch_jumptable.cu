// switch_jumptable: a dense switch lowered to a jump table (brx.idx + .branchtargets).
// nvcc-extra-flags: --jump-table-density=50
// (nvcc's default density threshold is 101 = never, so this one kernel is compiled with the flag above.)
__global__ void switch_jumptable(const int *x, const int *y, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i], w = y[i];
    switch (v) {
        case 0:  out[i] = w * 3; break;
        case 1:  out[i] = w + 7; break;
        case 2:  out[i] = w ^ 0x55; break;
        case 3:  out[i] = w - 11; break;
        case 4:  out[i] = w << 3; break;
        case 5:  out[i] = w * w; break;
        case 6:  out[i] = 99; break;
        case 7:  out[i] = w | 0x100; break;
        default: out[i] = -1;
    }
}
