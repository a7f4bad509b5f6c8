// qwengpu fuzz kernel 2026:4134:large (fzl_2026_4134)

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
FZ_DEV int fz_add_i(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
FZ_DEV int fz_sub_i(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
FZ_DEV int fz_mul_i(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
FZ_DEV int fz_neg_i(int a) { return (int)(0u - (unsigned)a); }
FZ_DEV int fz_div_i(int a, int b) { return (b == 0 || (a == FZ_I32_MIN && b == -1)) ? a : a / b; }
FZ_DEV int fz_mod_i(int a, int b) { return (b == 0 || (a == FZ_I32_MIN && b == -1)) ? a : a % b; }
FZ_DEV int fz_shl_i(int a, int b) { return (int)((unsigned)a << (b & 31)); }
FZ_DEV int fz_shr_i(int a, int b) { return a >> (b & 31); }
FZ_DEV unsigned fz_div_u(unsigned a, unsigned b) { return b == 0 ? a : a / b; }
FZ_DEV unsigned fz_mod_u(unsigned a, unsigned b) { return b == 0 ? a : a % b; }
FZ_DEV unsigned fz_shl_u(unsigned a, unsigned b) { return a << (b & 31); }
FZ_DEV unsigned fz_shr_u(unsigned a, unsigned b) { return a >> (b & 31); }
FZ_DEV i64 fz_add_l(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
FZ_DEV i64 fz_sub_l(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
FZ_DEV i64 fz_mul_l(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
FZ_DEV i64 fz_neg_l(i64 a) { return (i64)(0ull - (u64)a); }
FZ_DEV i64 fz_div_l(i64 a, i64 b) { return (b == 0 || (a == FZ_I64_MIN && b == -1)) ? a : a / b; }
FZ_DEV i64 fz_mod_l(i64 a, i64 b) { return (b == 0 || (a == FZ_I64_MIN && b == -1)) ? a : a % b; }
FZ_DEV i64 fz_shl_l(i64 a, i64 b) { return (i64)((u64)a << (b & 63)); }
FZ_DEV i64 fz_shr_l(i64 a, i64 b) { return a >> (b & 63); }
FZ_DEV u64 fz_div_ul(u64 a, u64 b) { return b == 0 ? a : a / b; }
FZ_DEV u64 fz_mod_ul(u64 a, u64 b) { return b == 0 ? a : a % b; }
FZ_DEV u64 fz_shl_ul(u64 a, u64 b) { return a << (b & 63); }
FZ_DEV u64 fz_shr_ul(u64 a, u64 b) { return a >> (b & 63); }
// float -> integer only inside the destination's range (C leaves the rest undefined); 0 outside
FZ_DEV int fz_f2i(float f) { return (f > -2147483648.0f && f < 2147483648.0f) ? (int)f : 0; }
FZ_DEV unsigned fz_f2u(float f) { return (f > -1.0f && f < 4294967296.0f) ? (unsigned)f : 0u; }
FZ_DEV i64 fz_f2l(float f) { return (f > -9223372036854775808.0f && f < 9223372036854775808.0f) ? (i64)f : 0; }
extern "C" __global__ void fzl_2026_4134(const int *ii, const i64 *il, const float *fi, int *oi, i64 *ol, float *of, unsigned *acc) {
    int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ int sh_i[32];
    __shared__ float sh_f[32];
    const int *gt = ii + 192;
    __shared__ int sh_w[1024];
    for (int j = t; j < 1024; j += blockDim.x) sh_w[j] = j * 31 + (int)blockIdx.x;
    __syncthreads();
    int loc[64];
    for (int j = 0; j < 64; ++j) loc[j] = fz_mul_i(j, g) ^ j;
    int i0 = ii[g * 3 + 0];
    int i1 = ii[g * 3 + 1];
    unsigned u0 = (unsigned)ii[g * 3 + 2] ^ 2654435769u;
    unsigned u1 = (unsigned)ii[g * 3 + 1] ^ 1013904242u;
    i64 l0 = il[g * 2 + 0];
    u64 q0 = (u64)il[g * 2 + 1] * 2685821657736338717ull;
    float f0 = fi[g * 3 + 0];
    float f1 = fi[g * 3 + 1];
    atomicAnd(&acc[3], fz_mod_u((~u0), (q0 <= q0 ? u1 : 11u)));
    if (((u64)g + q0) == (~fz_shl_ul(3ull, 64ull))) {
        q0 = (q0 ^ q0);
        atomicMin(&acc[5], (unsigned)(i0 & i0));
        q0 = (0ull - (~q0));
    }
    if ((int)fz_mul_l((-15LL), (i64)g) >= fz_shl_i(fz_neg_i(7), loc[((unsigned)(t) * 18315u & 63u)])) {
        if (q0 >= (u64)i0) {
            q0 = (~(u64)t);
            i1 = ((g != (int)(unsigned)t ? (i64)u1 : (i64)13113409277176137929ull) != ((f1 <= (-2.5f) ? l0 : (i64)g) ^ (i64)q0) ? fz_sub_i(fz_add_i(g, 16), (int)(1076609407 >= (-570821298))) : (fz_shl_i(i1, i0) & fz_add_i(loc[((unsigned)(u0) * 9529u & 63u)], i0)));
            atomicXor(&acc[1], ((unsigned)(i64)t - (~u0)));
        } else {
            l0 = fz_neg_l((~l0));
        }
        u0 = ((unsigned)i1 != (~u0) ? fz_div_u(4294967280u, 555654179u) : (u0 - u0));
    } else {
        l0 = fz_shl_l((l0 | l0), fz_mul_l(8LL, (-12LL)));
    }
    f0 = f0;
    sh_w[(t * 16 + 9) & 1023] = fz_f2i((0.5f - (float)g));
    __syncthreads();
    i1 = sh_w[((unsigned)(i1) * 5443u & 1023u)];
    __syncthreads();
    oi[g * 4 + 0] = (int)i0;
    oi[g * 4 + 1] = (int)i1;
    oi[g * 4 + 2] = (int)u0;
    oi[g * 4 + 3] = (int)u1;
    ol[g * 2 + 0] = (i64)l0;
    ol[g * 2 + 1] = (i64)q0;
    of[g * 2 + 0] = f0;
    of[g * 2 + 1] = f1;
}
