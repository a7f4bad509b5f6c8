// dot: the demo kernel -- 4 lanes each atomicAdd a[i]*b[i] into one int (global atomic add).
__global__ void dot(const int *a, const int *b, int *out) { int i = threadIdx.x; atomicAdd(out, a[i] * b[i]); }
