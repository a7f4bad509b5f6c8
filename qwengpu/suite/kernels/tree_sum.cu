// tree_sum: a recursive divide-and-conquer sum over each thread's slice of an array (pointer and
// bounds as parameters), and the recursion depth it reached.
__device__ __noinline__ int range_sum(const int *a, int lo, int hi, int *depth, int d) {
    if (d > *depth) *depth = d;
    if (hi - lo == 1) return a[lo];
    int mid = (lo + hi) / 2;
    return range_sum(a, lo, mid, depth, d + 1) + range_sum(a, mid, hi, depth, d + 1);
}

__global__ void tree_sum(const int *a, const int *len, int *sums, int *depths) {
    int t = threadIdx.x;
    int n = len[t];
    depths[t] = 0;
    sums[t] = range_sum(a + 16 * t, 0, n, depths + t, 1);
}
