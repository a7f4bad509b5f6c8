// fib_recursive: the naive recursive Fibonacci, a different n per thread (divergent recursion
// depths; fib(12) makes 465 calls).
__device__ __noinline__ int fib(int n) {
    if (n < 2) return n;
    return fib(n - 1) + fib(n - 2);
}

__global__ void fib_recursive(const int *n, int *out) {
    int t = threadIdx.x;
    out[t] = fib(n[t]);
}
