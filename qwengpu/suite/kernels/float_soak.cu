// float_soak: a long loop of f32 work on 4 lanes (a logistic map kept in [0, 1): multiplies and
// fused multiply-adds, a compare that picks max or a fused accumulate) whose length is a launch
// argument; `qwengpu soak --kernel float_soak --machine compact-fpu` runs it for a million tokens.
__global__ void float_soak(float *out, unsigned n) {
    float x = 0.1f + 0.2f * threadIdx.x, acc = 0.0f;
    for (unsigned i = 0; i < n; i++) {
        float t = 3.7f * x;
        x = fmaf(t, -x, t);                  // r x (1 - x)
        acc = x > 0.5f ? fmaxf(acc, x) : fmaf(x, 0.25f, acc);
    }
    out[threadIdx.x] = acc + x;
}
