// lcg_soak: a long loop of 32-bit LCG steps (multiplier, adder, a data-dependent branch) whose
// length is a launch argument; `qwengpu soak` runs it for a million generated tokens and more.
__global__ void lcg_soak(unsigned *out, unsigned n) {
    unsigned x = threadIdx.x * 2654435761u + 1u, acc = 0;
    for (unsigned i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        if (x & 0x10000u) acc += x >> 7;
        else acc ^= x;
    }
    out[threadIdx.x] = acc;
}
