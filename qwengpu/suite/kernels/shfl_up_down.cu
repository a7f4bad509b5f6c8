// shfl_up_down: __shfl_up_sync/__shfl_down_sync with width 4 -- raw results at the edges (a lane whose source is out
// of range keeps its own value), and an inclusive scan built from shfl_up.
__global__ void shfl_up_down(const int *x, int *out) {
    int lane = threadIdx.x;
    int v = x[lane];
    int up1 = __shfl_up_sync(0xf, v, 1, 4);
    int down2 = __shfl_down_sync(0xf, v, 2, 4);
    int scan = v;
    for (int d = 1; d < 4; d <<= 1) {
        int t = __shfl_up_sync(0xf, scan, d, 4);
        if (lane >= d) scan += t;
    }
    out[3 * lane + 0] = up1;
    out[3 * lane + 1] = down2;
    out[3 * lane + 2] = scan;
}
