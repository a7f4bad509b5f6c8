// break_continue: a loop (kept rolled) with a data-dependent continue and break, per lane.
__global__ void break_continue(const int *x, const int *limit, int n, int *out) {
    int i = threadIdx.x;
    int sum = 0, count = 0;
#pragma unroll 1
    for (int k = 0; k < n; k++) {
        int v = x[i * n + k];
        if (v % 3 == 0) continue;
        sum += v;
        count++;
        if (sum > limit[i]) break;
    }
    out[2 * i] = sum;
    out[2 * i + 1] = count;
}
