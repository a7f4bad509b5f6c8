// fast_sin: __sinf (sin.approx.ftz.f32) over 8 floats (2 blocks of 4): qwenGPU's definition of sin.approx
// (docs/floats.md, "Approximate instructions").
__global__ void fast_sin(const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = __sinf(x[i]);
}
