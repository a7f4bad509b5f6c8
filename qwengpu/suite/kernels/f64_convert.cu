// f64_convert: float<->double (cvt.f64.f32, cvt.rn.f32.f64), int<->double (cvt.rn.f64.s32, cvt.rzi.s32.f64), double->long long.
__global__ void f64_convert(const float *f, const double *d, const int *k, double *od, float *of, int *oi, long long *ol) {
    int i = threadIdx.x;
    od[2 * i + 0] = (double)f[i] * 3.0;        // exact: f32 -> f64 widening then a multiply
    od[2 * i + 1] = (double)k[i] + 0.25;
    of[i] = (float)d[i];                       // rounds to nearest
    oi[i] = (int)d[i];                         // truncates, saturates
    ol[i] = (long long)(d[i] * 1024.0);
}
