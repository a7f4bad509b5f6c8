// f32_rounding: floorf/ceilf/truncf/rintf/roundf (cvt.rmi/rpi/rzi/rni.f32.f32 and roundf's expansion), copysignf.
__global__ void f32_rounding(const float *a, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i];
    float *o = out + 6 * i;
    o[0] = floorf(x);
    o[1] = ceilf(x);
    o[2] = truncf(x);
    o[3] = rintf(x);                           // half to even
    o[4] = roundf(x);                          // half away from zero
    o[5] = copysignf(1.5f, x);
}
