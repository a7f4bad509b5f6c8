// gelu_tanh: GELU, tanh form, y = 0.5 x (1 + tanhf(sqrt(2/pi) (x + 0.044715 x^3))) over 8 floats (2 blocks of 4);
// tanhf is libdevice's (ex2.approx.ftz.f32 and rcp.approx.ftz.f32: qwenGPU's definitions, docs/floats.md).
__global__ void gelu_tanh(const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(u));
}
