// byte_shared: sub-word shared-memory stores (st.shared.u8/u16) by different threads into the same 32-bit words,
// read back as whole words (ld.shared.u32) -- little-endian byte lanes; 8 threads = 2 warps.
__global__ void byte_shared(const unsigned char *x, unsigned *words, unsigned short *halves) {
    __shared__ unsigned w[4];
    unsigned char *bytes = (unsigned char *)w;
    unsigned short *shorts = (unsigned short *)w;
    int t = threadIdx.x;
    bytes[2 * t] = x[t];                  // even bytes from thread t
    bytes[2 * t + 1] = (unsigned char)(x[t] ^ 0xff);
    __syncthreads();
    if (t < 4) words[t] = w[t];
    __syncthreads();
    shorts[t] = (unsigned short)(shorts[t] + 0x1234 * t);   // st.shared.u16
    __syncthreads();
    halves[t] = shorts[7 - t];
}
