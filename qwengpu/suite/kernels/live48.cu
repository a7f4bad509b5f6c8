// live48: 48 floats per thread held in registers at once (one mirrored compare-exchange stage of a
// sorting network): every value is loaded before any is written, so 48+ values are live.
__global__ void live48(const float *__restrict__ x, float *__restrict__ y) {
    const int n = 48;
    float v[n];
    const float *p = x + threadIdx.x * n;
#pragma unroll
    for (int k = 0; k < n; k++) v[k] = p[k];
    float *q = y + threadIdx.x * n;
#pragma unroll
    for (int k = 0; k < n / 2; k++) {
        q[k] = fmaxf(v[k], v[n - 1 - k]);
        q[n - 1 - k] = fminf(v[k], v[n - 1 - k]);
    }
}
