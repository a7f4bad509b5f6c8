// fast_log_rsqrt: the fast-math intrinsics __logf (lg2.approx.ftz.f32), rsqrtf (rsqrt.approx.ftz.f32 under
// --use_fast_math) and __fdividef (div.approx.ftz.f32) over 8 floats (2 blocks of 4): qwenGPU's definitions
// of the approximate instructions (docs/floats.md, "Approximate instructions").
// nvcc-extra-flags: --use_fast_math
__global__ void fast_log_rsqrt(const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    y[i] = __fdividef(__logf(v), rsqrtf(v + 1.0f));
}
