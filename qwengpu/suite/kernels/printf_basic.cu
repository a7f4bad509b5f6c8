// printf_basic: printf from 4 threads with %d %u %x %f %s %c %ld %lld, widths, precision and flags; the
// kernel also doubles its input. The output is per thread, in program order (qwengpu.semantics.printf);
// tests/test_printf.py checks its text on every engine.
#include <cstdio>

__global__ void printf_basic(const int *x, const float *f, int *y) {
    int t = threadIdx.x;
    int v = x[t];
    printf("[%d] %5d %-4u| %08x %.2f\n", t, v, (unsigned)v, v, f[t]);
    printf("%c %s %ld %lld\n", 'a' + t, "lane", (long)v * 3, (long long)v << 33);
    y[t] = 2 * v;
}
