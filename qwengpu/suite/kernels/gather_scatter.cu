// gather_scatter: data-dependent global addressing -- gather through an index array, scatter through a permutation
// (no two threads write the same element), negative pointer offsets.
__global__ void gather_scatter(const int *src, const int *idx, const int *perm, int *dst) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int *p = src + idx[i];
    dst[perm[i]] = p[0] * 2 + (idx[i] > 0 ? p[-1] : 0);
}
