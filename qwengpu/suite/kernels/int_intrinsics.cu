// int_intrinsics: __sad/__usad (sum of absolute differences), __hadd/__rhadd/__uhadd/__urhadd (overflow-free
// averages), and the 64-bit llmin/llmax/ullmin/ullmax.
__global__ void int_intrinsics(const int *a, const int *b, const unsigned *c, int *out, long long *o64) {
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    unsigned z = c[i];
    int *o = out + 6 * i;
    o[0] = (int)__sad(x, y, z);
    o[1] = (int)__usad((unsigned)x, (unsigned)y, z);
    o[2] = __hadd(x, y);
    o[3] = __rhadd(x, y);
    o[4] = (int)__uhadd((unsigned)x, (unsigned)y);
    o[5] = (int)__urhadd((unsigned)x, (unsigned)y);
    long long X = (long long)x * 1048576, Y = (long long)y * -1000;
    o64[2 * i + 0] = llmin(X, Y) ^ llmax(X, Y);
    o64[2 * i + 1] = (long long)(ullmin((unsigned long long)X, (unsigned long long)Y) -
                                 ullmax((unsigned long long)X, (unsigned long long)Y));
}
