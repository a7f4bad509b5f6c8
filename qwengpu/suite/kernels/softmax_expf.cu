// softmax_expf: softmax of 8 floats with expf (libdevice: ex2.approx.ftz.f32), one block of 8 threads
// (two warps), one element each; the max and the sum go through shared memory. expf and the ex2.approx
// it uses are qwenGPU's definition (docs/floats.md, "Approximate instructions").
__global__ void softmax_expf(const float *x, float *y) {
    __shared__ float s[8];
    int t = threadIdx.x;
    float a = x[t];
    s[t] = a;
    __syncthreads();
    float m = s[0];
    for (int k = 1; k < 8; k++) m = fmaxf(m, s[k]);
    __syncthreads();
    float e = expf(a - m);
    s[t] = e;
    __syncthreads();
    float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    y[t] = e / sum;
}
