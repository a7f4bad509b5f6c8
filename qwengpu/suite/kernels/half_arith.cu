// half_arith: __half and __half2 arithmetic (add.f16, sub.f16, mul.f16, fma.rn.f16, neg.f16, min.f16, setp.lt.f16,
// mul.f16x2, add.f16x2), each result widened to float.
#include <cuda_fp16.h>
__global__ void half_arith(const float *x, float *out) {
    int t = threadIdx.x;
    __half a = __float2half(x[t]), b = __float2half(x[t + 4]);
    __half2 p = __halves2half2(a, b);
    __half2 q = __hadd2(__hmul2(p, p), p);
    float *o = out + 9 * t;
    o[0] = __half2float(__hadd(a, b));
    o[1] = __half2float(__hsub(a, b));
    o[2] = __half2float(__hmul(a, b));
    o[3] = __half2float(__hfma(a, b, __hneg(a)));
    o[4] = __half2float(__hmin(a, b));
    o[5] = __hlt(a, b) ? 1.0f : 0.0f;
    o[6] = __low2float(q);
    o[7] = __high2float(q);
    o[8] = __half2float(a);
}
