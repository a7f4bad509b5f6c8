// sigmoid: y = 1 / (1 + expf(-x)) over 8 floats (2 blocks of 4); expf is libdevice's (ex2.approx.ftz.f32,
// qwenGPU's definition: docs/floats.md, "Approximate instructions").
__global__ void sigmoid(const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = 1.0f / (1.0f + expf(-x[i]));
}
