// fuzz_inverted_select_u64: reduced from `qwengpu fuzz --seed 1` kernel 51: a 64-bit remainder by a bitwise NOT,
// guarded against zero, of a value chosen by a float comparison. The machine's lowering selects with an inverted
// condition (the assembler once turned that into an inverted first operand, which no unit can read).
__global__ void fuzz_inverted_select_u64(const long long *l, const float *f, const unsigned long long *q,
                                         unsigned long long *out) {
    int t = threadIdx.x;
    unsigned long long b = ~(q[t] >> (q[t] & 63));
    unsigned long long a = (unsigned long long)((float)t >= f[t] ? l[t] : 0LL);
    out[t] = b == 0 ? a : a % b;
}
