// pointer_chase: walk a linked list stored as next-indices in global memory (data-dependent loads and loop exits).
__global__ void pointer_chase(const int *next, const int *val, const int *start, int *sum, int *len) {
    int i = threadIdx.x;
    int node = start[i], s = 0, n = 0;
    while (node >= 0) {
        s += val[node];
        n++;
        node = next[node];
    }
    sum[i] = s;
    len[i] = n;
}
