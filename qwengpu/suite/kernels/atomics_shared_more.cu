// atomics_shared_more: atomicSub/Inc/Dec/Exch/CAS and a 64-bit atomicAdd on __shared__ memory (order-independent
// uses only: modulo counters, own-slot exchange/CAS), 8 threads = 2 warps.
__global__ void atomics_shared_more(const int *x, int *out, unsigned long long *o64) {
    __shared__ unsigned cnt[3];
    __shared__ int slot[8];
    __shared__ unsigned long long big;
    int t = threadIdx.x;
    if (t == 0) { cnt[0] = 1000; cnt[1] = 3; cnt[2] = 5; big = 0xfffffff0ull; }
    slot[t] = t * 10;
    __syncthreads();
    int v = x[t];
    atomicSub(&cnt[0], (unsigned)(v & 0xff));
    atomicInc(&cnt[1], 4u);                  // modulo-5 counter
    atomicDec(&cnt[2], 6u);                  // modulo-7 counter, counting down
    int old = atomicExch(&slot[t], v);       // own slot: returns t * 10
    int seen = atomicCAS(&slot[t], v, v + 1);  // own slot: succeeds, returns v
    atomicAdd(&big, (unsigned long long)(unsigned)v);
    __syncthreads();
    out[2 * t] = old;
    out[2 * t + 1] = seen ^ slot[t];
    if (t < 3) out[16 + t] = (int)cnt[t];
    if (t == 0) o64[0] = big;
}
