// int_minmax: signed/unsigned min/max, abs, neg and 64-bit min/max on mixed-sign data.
__global__ void int_minmax(const int *a, const int *b, int *out, long long *o64) {
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    int *o = out + 6 * i;
    o[0] = min(x, y);
    o[1] = max(x, y);
    o[2] = (int)min((unsigned)x, (unsigned)y);
    o[3] = (int)max((unsigned)x, (unsigned)y);
    o[4] = abs(x);
    o[5] = -y;
    long long X = (long long)x * 3, Y = (long long)y << 2;
    o64[2 * i + 0] = min(X, Y) + llabs(X - Y);
    o64[2 * i + 1] = (long long)max((unsigned long long)X, (unsigned long long)Y);
}
