// int_divrem: signed/unsigned div and rem (incl. negative operands, truncation toward zero) and division by constants.
__global__ void int_divrem(const int *a, const int *b, int *sout, unsigned *uout) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int x = a[i], y = b[i];
    sout[4 * i + 0] = x / y;
    sout[4 * i + 1] = x % y;   // sign follows the dividend
    sout[4 * i + 2] = x / 7;   // constant divisors become mul.hi sequences
    sout[4 * i + 3] = x % -3;
    unsigned ux = (unsigned)x, uy = (unsigned)y;
    uout[4 * i + 0] = ux / uy;
    uout[4 * i + 1] = ux % uy;
    uout[4 * i + 2] = ux / 10u;
    uout[4 * i + 3] = ux % 10u;
}
