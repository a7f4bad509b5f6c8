// factorial_recursive: n! by recursion in 64-bit arithmetic, the product built on the way back
// out (through the result pointer, so the compiler cannot turn the recursion into a loop), and
// a recursive power by squaring.
__device__ __noinline__ void factorial(unsigned n, unsigned long long *out) {
    if (n <= 1) {
        *out = 1;
        return;
    }
    factorial(n - 1, out);
    *out *= n;
}

__device__ __noinline__ unsigned power(unsigned x, unsigned e) {
    if (e == 0) return 1;
    unsigned h = power(x, e / 2);
    return (e & 1) ? h * h * x : h * h;
}

__global__ void factorial_recursive(const unsigned *n, unsigned long long *fact, unsigned *pw) {
    int t = threadIdx.x;
    factorial(n[t], fact + t);
    pw[t] = power(n[t] + 1, n[t]);
}
