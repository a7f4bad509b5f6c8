// match_sync: __match_any_sync/__match_all_sync (match.any/all.sync.b32) over 4 lanes, incl. a 64-bit match.
__global__ void match_sync(const int *x, unsigned *out) {
    int lane = threadIdx.x;
    int v = x[blockIdx.x * 4 + lane];
    int pred;
    unsigned *o = out + blockIdx.x * 12 + 3 * lane;
    o[0] = __match_any_sync(0xf, v);
    unsigned all = __match_all_sync(0xf, v & 1, &pred);
    o[1] = all | (pred ? 0x100u : 0u);
    o[2] = __match_any_sync(0xf, (long long)(v & 6) << 33);   // match.any.sync.b64
}
