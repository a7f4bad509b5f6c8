// crc32: bitwise CRC-32 (reflected, poly 0xEDB88320) of 4 bytes per lane: nested loops over bytes and bits.
__global__ void crc32(const unsigned char *data, int nbytes, unsigned *out) {
    int i = threadIdx.x;
    unsigned crc = 0xffffffffu;
    for (int k = 0; k < nbytes; k++) {
        crc ^= data[i * nbytes + k];
#pragma unroll 1
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    out[i] = ~crc;
}
