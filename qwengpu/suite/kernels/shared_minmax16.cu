// shared_minmax16: float min and max reductions over 16 threads (4 warps) in shared memory with __syncthreads.
__global__ void shared_minmax16(const float *x, float *out) {
    __shared__ float lo[16], hi[16];
    int t = threadIdx.x;
    lo[t] = hi[t] = x[t];
    __syncthreads();
    for (int stride = 8; stride > 0; stride >>= 1) {
        if (t < stride) {
            lo[t] = fminf(lo[t], lo[t + stride]);
            hi[t] = fmaxf(hi[t], hi[t + stride]);
        }
        __syncthreads();
    }
    if (t == 0) { out[0] = lo[0]; out[1] = hi[0]; }
}
