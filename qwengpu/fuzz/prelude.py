"""The text every fuzz kernel is compiled with, by nvcc and by the host C++ compiler.

The kernel text is written once. This prelude makes it valid CUDA (under nvcc, `__CUDACC__`) and
valid C++ for the host, where a small scheduler runs a block's threads one by one as coroutines
(ucontext): `__syncthreads()` and every warp shuffle are phase boundaries at which each thread
yields; the scheduler runs every thread to the boundary before any goes on, so a shuffle reads the
values all lanes of its warp wrote. Atomics are plain read-modify-writes (only one thread runs at a
time). The safe-math helpers keep the C free of undefined behaviour (no signed overflow, no shift
by >= the width, no division by zero, no out-of-range float->int conversion), as Csmith's do.
"""

PRELUDE = r"""
#ifdef __CUDACC__
#define FZ_DEV __device__ __forceinline__
#else
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#define FZ_DEV static inline
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct fz_dim3 { unsigned x, y, z; };
static fz_dim3 threadIdx, blockIdx, blockDim, gridDim;
enum { FZ_MAX_THREADS = 64, FZ_STACK = 256 * 1024 };
static ucontext_t fz_main_ctx, fz_ctx[FZ_MAX_THREADS];
static char *fz_stack[FZ_MAX_THREADS];
static int fz_cur;
static unsigned long long fz_slot[FZ_MAX_THREADS];
static void fz_yield() { swapcontext(&fz_ctx[fz_cur], &fz_main_ctx); }
static void __syncthreads() { fz_yield(); }
// a shuffle: every lane publishes its value, all lanes reach the boundary, each reads its source,
// and all lanes pass a second boundary before any publishes again
template <class T> static T fz_exchange(T v, int src_lane) {
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    fz_slot[fz_cur] = bits;
    fz_yield();
    unsigned long long got = fz_slot[fz_cur - fz_cur % 4 + src_lane];
    fz_yield();
    T r;
    std::memcpy(&r, &got, sizeof r);
    return r;
}
static int fz_lane() { return fz_cur % 4; }
template <class T> static T __shfl_sync(unsigned, T v, int src, int width) {
    return fz_exchange(v, ((src % width) + width) % width);
}
template <class T> static T __shfl_xor_sync(unsigned, T v, int mask, int width) {
    int s = fz_lane() ^ mask;
    return fz_exchange(v, s < width ? s : fz_lane());
}
template <class T> static T __shfl_up_sync(unsigned, T v, unsigned d, int width) {
    int s = fz_lane() - (int)d;
    return fz_exchange(v, s >= 0 ? s : fz_lane());
}
template <class T> static T __shfl_down_sync(unsigned, T v, unsigned d, int width) {
    int s = fz_lane() + (int)d;
    return fz_exchange(v, s < width ? s : fz_lane());
}
static unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static unsigned atomicXor(unsigned *p, unsigned v) { unsigned o = *p; *p = o ^ v; return o; }
static unsigned atomicOr(unsigned *p, unsigned v) { unsigned o = *p; *p = o | v; return o; }
static unsigned atomicAnd(unsigned *p, unsigned v) { unsigned o = *p; *p = o & v; return o; }
static unsigned atomicMax(unsigned *p, unsigned v) { unsigned o = *p; *p = o > v ? o : v; return o; }
static unsigned atomicMin(unsigned *p, unsigned v) { unsigned o = *p; *p = o < v ? o : v; return o; }
#endif
typedef long long i64;
typedef unsigned long long u64;
#define FZ_I32_MIN (-2147483647 - 1)
#define FZ_I64_MIN (-9223372036854775807LL - 1)
@SAFE_MATH@
// float -> integer only inside the destination's range (C leaves the rest undefined); 0 outside
FZ_DEV int fz_f2i(float f) { return (f > -2147483648.0f && f < 2147483648.0f) ? (int)f : 0; }
FZ_DEV unsigned fz_f2u(float f) { return (f > -1.0f && f < 4294967296.0f) ? (unsigned)f : 0u; }
FZ_DEV i64 fz_f2l(float f) { return (f > -9223372036854775808.0f && f < 9223372036854775808.0f) ? (i64)f : 0; }
"""


def _safe_math(signed: str, unsigned: str, s: str, u: str, bits: int, int_min: str, zero: str) -> str:
    """The safe-math helpers of one width: signed arithmetic wraps through unsigned, shifts are
    masked to the width, division by zero and INT_MIN / -1 return the dividend."""
    S, U, m = signed, unsigned, bits - 1
    return "\n".join([
        f"FZ_DEV {S} fz_add_{s}({S} a, {S} b) {{ return ({S})(({U})a + ({U})b); }}",
        f"FZ_DEV {S} fz_sub_{s}({S} a, {S} b) {{ return ({S})(({U})a - ({U})b); }}",
        f"FZ_DEV {S} fz_mul_{s}({S} a, {S} b) {{ return ({S})(({U})a * ({U})b); }}",
        f"FZ_DEV {S} fz_neg_{s}({S} a) {{ return ({S})({zero} - ({U})a); }}",
        f"FZ_DEV {S} fz_div_{s}({S} a, {S} b) {{ return (b == 0 || (a == {int_min} && b == -1)) ? a : a / b; }}",
        f"FZ_DEV {S} fz_mod_{s}({S} a, {S} b) {{ return (b == 0 || (a == {int_min} && b == -1)) ? a : a % b; }}",
        f"FZ_DEV {S} fz_shl_{s}({S} a, {S} b) {{ return ({S})(({U})a << (b & {m})); }}",
        f"FZ_DEV {S} fz_shr_{s}({S} a, {S} b) {{ return a >> (b & {m}); }}",
        f"FZ_DEV {U} fz_div_{u}({U} a, {U} b) {{ return b == 0 ? a : a / b; }}",
        f"FZ_DEV {U} fz_mod_{u}({U} a, {U} b) {{ return b == 0 ? a : a % b; }}",
        f"FZ_DEV {U} fz_shl_{u}({U} a, {U} b) {{ return a << (b & {m}); }}",
        f"FZ_DEV {U} fz_shr_{u}({U} a, {U} b) {{ return a >> (b & {m}); }}",
    ]) + "\n"


PRELUDE = PRELUDE.replace("@SAFE_MATH@\n", _safe_math("int", "unsigned", "i", "u", 32, "FZ_I32_MIN", "0u")
                          + _safe_math("i64", "u64", "l", "ul", 64, "FZ_I64_MIN", "0ull"))


#: the host program's scheduler: runs one launch of a kernel, block by block, thread by thread
HOST_RUNNER = r"""
static void (*fz_body)();
static bool fz_returned;
static void fz_trampoline() { fz_body(); fz_returned = true; }
static void fz_launch(void (*body)(), unsigned grid, unsigned block) {
    fz_body = body;
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned t = 0; t < block; ++t)
        if (!fz_stack[t]) fz_stack[t] = (char *)std::malloc(FZ_STACK);
    for (unsigned b = 0; b < grid; ++b) {
        bool done[FZ_MAX_THREADS] = {false};
        for (unsigned t = 0; t < block; ++t) {
            getcontext(&fz_ctx[t]);
            fz_ctx[t].uc_stack.ss_sp = fz_stack[t];
            fz_ctx[t].uc_stack.ss_size = FZ_STACK;
            fz_ctx[t].uc_link = &fz_main_ctx;
            makecontext(&fz_ctx[t], fz_trampoline, 0);
        }
        unsigned finished = 0;
        while (finished < block) {
            unsigned finished_now = 0;
            for (unsigned t = 0; t < block; ++t) {
                if (done[t]) continue;
                fz_cur = (int)t;
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                // a thread that returns comes back through uc_link; one that yields through fz_yield
                fz_returned = false;
                swapcontext(&fz_main_ctx, &fz_ctx[t]);
                if (fz_returned) { done[t] = true; ++finished_now; }
            }
            // every thread reaches every boundary: none may finish while another still waits
            if (finished_now && finished_now != block - finished) {
                std::fprintf(stderr, "threads disagree on the number of barriers\n");
                std::exit(3);
            }
            finished += finished_now;
        }
    }
}
static void fz_print(const char *name, const void *data, size_t bytes, size_t item) {
    std::printf("%s", name);
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < bytes; i += item) {
        unsigned long long v = 0;
        std::memcpy(&v, p + i, item);
        std::printf(" %llx", v);
    }
    std::printf("\n");
}
"""
