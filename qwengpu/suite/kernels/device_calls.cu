// device_calls: __noinline__ device functions -- several params, a struct return value, an out-pointer param,
// a float function and a call chain two deep (kernel -> mix -> rotl).
struct Pair { int lo; int hi; };

__device__ __noinline__ unsigned rotl(unsigned x, unsigned n) { return (x << (n & 31)) | (x >> ((32 - n) & 31)); }

__device__ __noinline__ int mix(int a, int b, int c, int d) {
    unsigned r = rotl((unsigned)a ^ (unsigned)b, (unsigned)c);
    return (int)(r + (unsigned)d * 5u);
}

__device__ __noinline__ Pair split(long long v) {
    Pair p;
    p.lo = (int)v;
    p.hi = (int)(v >> 32);
    return p;
}

__device__ __noinline__ float lerp(float a, float b, float t, int *flag) {
    *flag = t > 0.5f;
    return __fadd_rn(a, __fmul_rn(t, __fsub_rn(b, a)));
}

__global__ void device_calls(const int *x, const float *f, int *out, float *fout) {
    int i = threadIdx.x;
    int m = mix(x[i], x[i + 4], i + 3, x[(i + 1) & 3]);
    Pair p = split((long long)m * 1000003LL);
    int flag;
    fout[i] = lerp(f[i], f[i + 4], f[8 + i], &flag);
    out[3 * i + 0] = m;
    out[3 * i + 1] = p.lo ^ p.hi;
    out[3 * i + 2] = flag;
}
