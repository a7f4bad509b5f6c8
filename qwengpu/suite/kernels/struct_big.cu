// struct_big: a 24-byte struct by value (int, float, double, two shorts, four bytes; align 8), given in the launch
// spec as {"struct": HEX}: its bytes in memory order.
struct Params { int n; float scale; double offset; short lo, hi; unsigned char add[4]; };

__global__ void struct_big(const float *x, Params p, float *out, int *iout) {
    int i = threadIdx.x;
    float v = x[i] * p.scale + (float)p.offset;
    out[i] = i < p.n ? v : 0.0f;
    int q = (int)x[i];
    iout[i] = min(max(q, (int)p.lo), (int)p.hi) + p.add[i & 3];
}
