// black_scholes: European call and put prices of 16 options by the Black-Scholes formula, one
// thread each (4 blocks of 4): logf, sqrtf, expf, divisions and a polynomial cumulative normal
// distribution (Abramowitz & Stegun 26.2.17, |error| < 7.5e-8). The f32 arithmetic is written with
// the _rn intrinsics so that nvcc neither contracts nor reorders it: the oracle repeats it step by
// step, and a test checks the prices against a double-precision Black-Scholes (an L1 bound).
__device__ float normal_cdf(float d) {
    float k = __fdiv_rn(1.0f, __fmaf_rn(0.2316419f, fabsf(d), 1.0f));
    float poly = __fmaf_rn(1.330274429f, k, -1.821255978f);
    poly = __fmaf_rn(poly, k, 1.781477937f);
    poly = __fmaf_rn(poly, k, -0.356563782f);
    poly = __fmaf_rn(poly, k, 0.319381530f);
    poly = __fmul_rn(poly, k);
    float density = __fmul_rn(0.39894228f, expf(__fmul_rn(__fmul_rn(-0.5f, d), d)));
    float tail = __fmul_rn(density, poly);                      // P(Z > |d|)
    return d > 0.0f ? __fadd_rn(1.0f, -tail) : tail;
}

__global__ void black_scholes(const float *price, const float *strike, const float *years, float *call,
                              float *put, float rate, float vol) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = price[i], x = strike[i], t = years[i];
    float vol_root_t = __fmul_rn(vol, sqrtf(t));
    float drift = __fmaf_rn(__fmul_rn(0.5f, vol), vol, rate);
    float d1 = __fdiv_rn(__fmaf_rn(drift, t, logf(__fdiv_rn(s, x))), vol_root_t);
    float d2 = __fadd_rn(d1, -vol_root_t);
    float n1, n2;
#pragma unroll 1
    for (int k = 0; k < 2; k++) {             // one copy of normal_cdf: the program fits a 512-bundle ROM
        float n = normal_cdf(k ? d2 : d1);
        if (k) n2 = n; else n1 = n;
    }
    float discounted = __fmul_rn(x, expf(__fmul_rn(-rate, t)));
    call[i] = __fmaf_rn(s, n1, -__fmul_rn(discounted, n2));
    put[i] = __fmaf_rn(discounted, __fadd_rn(1.0f, -n2), -__fmul_rn(s, __fadd_rn(1.0f, -n1)));
}
