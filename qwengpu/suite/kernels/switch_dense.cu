// switch_dense: a dense 12-case switch (nvcc's default flags lower it to a compare tree, not a jump table).
__global__ void switch_dense(const int *x, const int *y, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i], w = y[i], r;
    switch (v) {
        case 0:  r = w * 3; break;
        case 1:  r = w + 7; break;
        case 2:  r = w ^ 0x55; break;
        case 3:  r = w - 11; break;
        case 4:  r = w << 3; break;
        case 5:  r = w * w; break;
        case 6:  r = 99; break;
        case 7:  r = w | 0x100; break;
        case 8:  r = w / 3; break;
        case 9:  r = w % 7; break;
        case 10: r = ~w; break;
        case 11: r = w & 0xf0; break;
        default: r = -1;
    }
    out[i] = r;
}
