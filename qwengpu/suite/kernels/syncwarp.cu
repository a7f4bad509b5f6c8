// syncwarp: lanes exchange values through shared memory separated by __syncwarp(0xf) (bar.warp.sync), 4 threads.
__global__ void syncwarp(const int *x, int *out) {
    __shared__ int s[4];
    int lane = threadIdx.x;
    s[lane] = x[lane];
    __syncwarp(0xf);
    int a = s[(lane + 1) & 3], b = s[(lane + 2) & 3];
    __syncwarp(0xf);
    s[lane] = a * 2 + b;
    __syncwarp(0xf);
    out[lane] = s[3 - lane];
}
